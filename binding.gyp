# The Node addon: the shared C core plus the Node-API binding, one C11 build
# that loads on every Node >= 20 (Node-API only, no V8 C++ API).
{
  "targets": [
    {
      "target_name": "pyroscope_native",
      "sources": [
        "<!@(node -e \"const g=require('fs');const p=require('path');const out=[];const walk=(d,re,deep)=>{for(const f of g.readdirSync(d).sort()){const q=p.join(d,f);if(g.statSync(q).isDirectory()){if(deep)walk(q,re,deep)}else if(re.test(f))out.push(q)}};for(const d of g.readdirSync('core/src').sort())walk(p.join('core/src',d),/\\.c$/,false);walk('core/report',/\\.c$/,false);walk('core/gen',/\\.c$/,true);walk('bindings/node/src',/\\.c$/,false);console.log(out.join(' '))\")"
      ],
      "include_dirs": [
        "core/include",
        "core/src",
        "core/report",
        "core/gen",
        "bindings/node/src"
      ],
      "defines": ["NAPI_VERSION=8", "_GNU_SOURCE"],
      "cflags!": ["-fno-exceptions"],
      "cflags_c": ["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wvla",
                   "-fvisibility=hidden"],
      "libraries": ["-lprotobuf-c", "-lz", "-lpthread", "-lm", "-ldl"]
    }
  ]
}
