// otlp_check decodes an ExportProfilesServiceRequest (protobuf or OTLP/JSON,
// raw or gzip'ed) with
// the OpenTelemetry Collector's own pdata (pprofile), checks that every
// dictionary index is in range, and prints what it read, one fact a line,
// for tests/c/test_otlp.c to compare with what it encoded.
//
//	service.name <value>
//	process.pid <value>
//	profile <type> <unit> samples <n> sum <sum>
//	sample <type> <leaf function> <value> link <trace id> <span id>   ("-" when none)
//	attr <type> <leaf function> <key>=<value>
package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"

	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "otlp_check: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 2 {
		fail("usage: otlp_check <request.pb[.gz]>")
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail("%v", err)
	}
	if len(data) > 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			fail("gzip: %v", err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			fail("gzip: %v", err)
		}
	}
	req := pprofileotlp.NewExportRequest()
	if len(data) > 0 && data[0] == '{' {
		// OTLP/JSON (otlp_protocol http/json), by the Collector's reader
		if err := req.UnmarshalJSON(data); err != nil {
			fail("unmarshal JSON: %v", err)
		}
	} else if err := req.UnmarshalProto(data); err != nil {
		fail("unmarshal: %v", err)
	}
	pd := req.Profiles()
	dict := pd.Dictionary()
	strs := dict.StringTable()
	str := func(i int32, what string) string {
		if i < 0 || int(i) >= strs.Len() {
			fail("%s: string index %d of %d", what, i, strs.Len())
		}
		return strs.At(int(i))
	}
	if strs.Len() == 0 || strs.At(0) != "" {
		fail("string_table[0] must be \"\"")
	}
	for _, n := range []struct {
		name string
		len  int
	}{{"mapping", dict.MappingTable().Len()}, {"location", dict.LocationTable().Len()},
		{"function", dict.FunctionTable().Len()}, {"link", dict.LinkTable().Len()},
		{"attribute", dict.AttributeTable().Len()}, {"stack", dict.StackTable().Len()}} {
		if n.len == 0 {
			fail("%s_table has no zero value", n.name)
		}
	}
	leaf := func(stack int32) string {
		if stack <= 0 || int(stack) >= dict.StackTable().Len() {
			fail("stack index %d of %d", stack, dict.StackTable().Len())
		}
		locs := dict.StackTable().At(int(stack)).LocationIndices()
		if locs.Len() == 0 {
			return ""
		}
		name := ""
		for i := 0; i < locs.Len(); i++ {
			li := locs.At(i)
			if li <= 0 || int(li) >= dict.LocationTable().Len() {
				fail("location index %d of %d", li, dict.LocationTable().Len())
			}
			lines := dict.LocationTable().At(int(li)).Lines()
			for j := 0; j < lines.Len(); j++ {
				fi := lines.At(j).FunctionIndex()
				if fi < 0 || int(fi) >= dict.FunctionTable().Len() {
					fail("function index %d of %d", fi, dict.FunctionTable().Len())
				}
				fn := dict.FunctionTable().At(int(fi))
				str(fn.FilenameStrindex(), "function file")
				n := str(fn.NameStrindex(), "function name")
				if i == 0 && j == 0 {
					name = n
				}
			}
		}
		return name
	}
	rps := pd.ResourceProfiles()
	for r := 0; r < rps.Len(); r++ {
		attrs := rps.At(r).Resource().Attributes()
		if v, ok := attrs.Get("service.name"); ok {
			fmt.Printf("service.name %s\n", v.AsString())
		}
		if v, ok := attrs.Get("process.pid"); ok {
			fmt.Printf("process.pid %s\n", v.AsString())
		}
		sps := rps.At(r).ScopeProfiles()
		for s := 0; s < sps.Len(); s++ {
			profs := sps.At(s).Profiles()
			for p := 0; p < profs.Len(); p++ {
				prof := profs.At(p)
				typ := str(prof.SampleType().TypeStrindex(), "sample type")
				unit := str(prof.SampleType().UnitStrindex(), "sample unit")
				var sum int64
				samples := prof.Samples()
				for i := 0; i < samples.Len(); i++ {
					sm := samples.At(i)
					if sm.Values().Len() != 1 {
						fail("sample %d has %d values", i, sm.Values().Len())
					}
					v := sm.Values().At(0)
					sum += v
					name := leaf(sm.StackIndex())
					link := "- -"
					li := sm.LinkIndex()
					if li < 0 || int(li) >= dict.LinkTable().Len() {
						fail("link index %d of %d", li, dict.LinkTable().Len())
					}
					if li > 0 {
						l := dict.LinkTable().At(int(li))
						link = l.TraceID().String() + " " + l.SpanID().String()
					}
					fmt.Printf("sample %s %s %d link %s\n", typ, name, v, link)
					ai := sm.AttributeIndices()
					for a := 0; a < ai.Len(); a++ {
						idx := ai.At(a)
						if idx <= 0 || int(idx) >= dict.AttributeTable().Len() {
							fail("attribute index %d of %d", idx, dict.AttributeTable().Len())
						}
						kv := dict.AttributeTable().At(int(idx))
						fmt.Printf("attr %s %s %s=%s\n", typ, name, str(kv.KeyStrindex(), "attribute key"),
							kv.Value().AsString())
					}
				}
				fmt.Printf("profile %s %s samples %d sum %d\n", typ, unit, samples.Len(), sum)
			}
		}
	}
}
