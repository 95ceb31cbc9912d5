/* The report page: one self-contained HTML file (inline CSS and JS, no
 * network) with a flame graph (an icicle, root at the top), a label panel
 * to filter by any label, a breakdown by a label's values, a sortable top
 * table, a sandwich view of a function and a diff of two selections. The
 * data travels as JSON inside a <script type="application/json"> block: flat
 * integer arrays (see write_data), so neither the writer nor the page
 * recurses however deep the stacks are. */
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pyroscope_native.h"
#include "pyroscope_report.h"
#include "report_tree.h"

/* The root's label in the page. */
#define ROOT_LABEL "all"

/* A JSON string that is also safe inside <script>: '<' '>' '&' are escaped,
 * so "</script>" or "<!--" in a function name cannot end the block; U+2028/9
 * are escaped for older JS parsers; bytes that are not UTF-8 become U+FFFD. */
static void json_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    putc('"', f);
    while (n > 0) {
        uint32_t cp;
        size_t k = pn_utf8_seq(p, n, &cp);
        if (k == 0) {
            fputs("\\ufffd", f);
            p++, n--;
            continue;
        }
        if (cp == '"')
            fputs("\\\"", f);
        else if (cp == '\\')
            fputs("\\\\", f);
        else if (cp < 0x20 || cp == 0x7f || cp == '<' || cp == '>' || cp == '&' ||
                 cp == 0x2028 || cp == 0x2029)
            fprintf(f, "\\u%04" PRIx32, cp);
        else
            fwrite(p, 1, k, f);
        p += k, n -= k;
    }
    putc('"', f);
}

/* Text for HTML element content: markup characters as entities, control
 * characters as spaces, bytes that are not UTF-8 as U+FFFD. */
static void html_text(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    while (n > 0) {
        uint32_t cp;
        size_t k = pn_utf8_seq(p, n, &cp);
        if (k == 0) {
            fputs("\xef\xbf\xbd", f);
            p++, n--;
            continue;
        }
        switch (cp) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default:
            if (cp < 0x20 || cp == 0x7f)
                putc(' ', f);
            else
                fwrite(p, 1, k, f);
        }
        p += k, n -= k;
    }
}

/* ------------------------------------------------------------ the page */

static const char PAGE_HEAD[] =
    "<!DOCTYPE html>\n"
    "<html lang=\"en\">\n"
    "<head>\n"
    "<meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<title>";

/* Between the <title> and the <h1>: the style sheet. */
static const char PAGE_STYLE[] =
    "</title>\n"
    "<style>\n"
    "[hidden]{display:none!important}\n"
    "body{margin:0;color:#222;background:#fff;font:13px/1.4 system-ui,-apple-system,'Segoe UI',Roboto,Arial,sans-serif}\n"
    "header,.bar{display:flex;flex-wrap:wrap;align-items:center;gap:6px 12px;padding:6px 12px;border-bottom:1px solid #ddd}\n"
    "h1{margin:0;font-size:16px;font-weight:600;overflow-wrap:anywhere}\n"
    "h2{margin:10px 0 4px;font-size:14px;font-weight:600}\n"
    "#summary{color:#555}\n"
    "#note{color:#8a5a00}\n"
    ".right{margin-left:auto;display:flex;align-items:center;gap:8px}\n"
    "input[type=search],input[type=text]{padding:3px 6px;font:inherit}\n"
    "#search{width:220px}\n"
    "#filter,#a,#b{width:280px}\n"
    "#match{color:#8e24aa;white-space:nowrap}\n"
    "button,select{font:inherit;padding:2px 8px;cursor:pointer}\n"
    "#main{display:flex;align-items:flex-start;border-bottom:1px solid #ddd}\n"
    "#labels{width:300px;flex:none;overflow:auto;padding:6px 8px;border-right:1px solid #ddd;box-sizing:border-box}\n"
    "#labels details{margin-bottom:4px}\n"
    "#labels summary{cursor:pointer;font-weight:600}\n"
    "#labels label{display:flex;gap:6px;padding-left:12px;white-space:nowrap;cursor:pointer}\n"
    "#labels label .v{flex:1;min-width:0;overflow:hidden;text-overflow:ellipsis}\n"
    "#labels .amt,.sn{color:#666;font-variant-numeric:tabular-nums}\n"
    ".hint{color:#777;padding-left:12px}\n"
    "#view{flex:1;min-width:0;position:relative;height:240px;overflow-x:hidden;overflow-y:auto;scrollbar-gutter:stable}\n"
    "#fg{position:sticky;top:0;display:block;cursor:pointer}\n"
    "#tables{display:flex;flex-wrap:wrap;gap:8px 24px;padding:0 12px 16px}\n"
    "#tables section{min-width:0;flex:1 1 380px;overflow-x:auto}\n"
    "#tables #topsec{flex:3 1 760px}\n"
    "#timeline{padding:4px 12px;border-bottom:1px solid #ddd}\n"
    "#tl{display:block;width:100%;height:56px;cursor:crosshair}\n"
    "#tlbar{display:flex;gap:12px;align-items:center;color:#555}\n"
    "#tables #sandwich{flex-basis:100%}\n"
    "table{border-collapse:collapse;width:100%}\n"
    "th,td{padding:2px 8px;border-bottom:1px solid #eee;text-align:left;white-space:nowrap}\n"
    "th{background:#f5f5f5;font-weight:600}\n"
    "th[data-sort]{cursor:pointer;text-decoration:underline dotted}\n"
    "th.sorted::after{content:' \\25BE'}\n"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
    "td.fn{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:normal;overflow-wrap:anywhere;min-width:10em}\n"
    "td.w{color:#666;white-space:normal;overflow-wrap:anywhere;min-width:14em}\n"
    "tbody tr{cursor:pointer}\n"
    "tbody tr:hover{background:#fff6d6}\n"
    "#sandwich .pair{display:flex;gap:16px}\n"
    "#sandwich .pair>div{flex:1;min-width:0}\n"
    "#tip{position:fixed;z-index:2;display:none;pointer-events:none;max-width:560px;padding:6px 8px;background:#fffffa;border:1px solid #999;border-radius:3px;box-shadow:0 2px 8px rgba(0,0,0,.25);overflow-wrap:anywhere}\n"
    "#tip b{display:block;margin-bottom:3px;font-weight:600;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}\n"
    "</style>\n"
    "</head>\n"
    "<body>\n"
    "<header>\n"
    "<h1>";

/* After the title: the controls, the label panel, the flame graph and
 * the tables, then the data block. */
static const char PAGE_BODY[] =
    "</h1>\n"
    "<span id=\"summary\"></span>\n"
    "<span id=\"note\"></span>\n"
    "<div class=\"right\">\n"
    "<input id=\"search\" type=\"search\" placeholder=\"Search functions\" aria-label=\"Search functions\" autocomplete=\"off\">\n"
    "<span id=\"match\"></span>\n"
    "<button id=\"reset\" type=\"button\">Reset zoom</button>\n"
    "</div>\n"
    "</header>\n"
    "<div class=\"bar\">\n"
    "<label>Filter <input id=\"filter\" type=\"text\" placeholder=\"key=value,key=value\" autocomplete=\"off\"></label>\n"
    "<button id=\"clear\" type=\"button\">Clear</button>\n"
    "<label>Breakdown by <select id=\"group\"></select></label>\n"
    "<button id=\"mode\" type=\"button\">Diff&hellip;</button>\n"
    "</div>\n"
    "<div class=\"bar\" id=\"diffbar\" hidden>\n"
    "<label>A <input id=\"a\" type=\"text\" placeholder=\"key=value (empty: all)\" autocomplete=\"off\"></label>\n"
    "<label>B <input id=\"b\" type=\"text\" placeholder=\"key=value (empty: all)\" autocomplete=\"off\"></label>\n"
    "<span id=\"diffsum\"></span>\n"
    "<span class=\"hint\">red: larger share in B, green: smaller</span>\n"
    "</div>\n"
    "<div id=\"timeline\" hidden><canvas id=\"tl\" aria-label=\"CPU per profile over time: drag to select a time range\"></canvas>\n"
    "<div id=\"tlbar\"><span id=\"tlsum\"></span><button id=\"tlall\" type=\"button\" hidden>All time</button></div></div>\n"
    "<div id=\"main\"><div id=\"labels\"></div>\n"
    "<div id=\"view\"><canvas id=\"fg\"></canvas><div id=\"spacer\"></div></div></div>\n"
    "<div id=\"tables\">\n"
    "<section id=\"sandwich\" hidden><h2>Sandwich: <span id=\"swname\"></span> <button id=\"swclose\" type=\"button\">Close</button></h2>\n"
    "<div class=\"pair\"><div><h2>Callers</h2><table id=\"callers\"></table></div>\n"
    "<div><h2>Callees</h2><table id=\"callees\"></table></div></div></section>\n"
    "<section id=\"bdsec\" hidden><h2>Breakdown</h2><table id=\"bd\"></table></section>\n"
    "<section id=\"topsec\"><h2>Top functions <span id=\"topnote\" class=\"hint\"></span></h2><table id=\"top\"></table></section>\n"
    "</div>\n"
    "<div id=\"tip\"></div>\n"
    "<noscript><p>This report needs JavaScript.</p></noscript>\n"
    "<script id=\"pn-data\" type=\"application/json\">\n";

/* The viewer. Every view is computed from the records (leaf node, label set,
 * value, samples): a selection sums the records it keeps into the nodes, so
 * filters, breakdowns and diffs need no other data. Flame graph layout
 * happens once per zoom or resize: a breadth-first walk of the zoomed
 * subtree that skips frames narrower than a pixel, merging runs of such
 * siblings into one grey block, so the cost follows what is visible rather
 * than the node count. Drawing covers only the rows scrolled into view; the
 * canvas is sticky and a spacer gives the scroll height. The state lives in
 * the URL fragment (filter=, group=, diff&a=&b=, fn=), so a view can be
 * linked, and the headless-browser test drives it the same way. */
static const char PAGE_SCRIPT[] =
    "</script>\n"
    "<script>\n"
    "(function () {\n"
    "'use strict';\n"
    "var D = JSON.parse(document.getElementById('pn-data').textContent);\n"
    "var S = D.names, F = D.funcs, raw = D.nodes, N = raw.length / 3;\n"
    "var fnOf = new Int32Array(N), depth = new Int32Array(N), lineOf = new Int32Array(N);\n"
    "var parent = new Int32Array(N), end = new Int32Array(N), outer = new Uint8Array(N);\n"
    "var total = new Float64Array(N), self = new Float64Array(N), x0 = new Float64Array(N);\n"
    "var totA = null, totB = null;\n"
    "var i, stack = [];\n"
    "for (i = 0; i < N; i++) {\n"
    "  fnOf[i] = raw[3 * i]; depth[i] = raw[3 * i + 1]; lineOf[i] = raw[3 * i + 2];\n"
    "  while (stack.length && depth[stack[stack.length - 1]] >= depth[i]) end[stack.pop()] = i;\n"
    "  parent[i] = stack.length ? stack[stack.length - 1] : -1;\n"
    "  stack.push(i);\n"
    "}\n"
    "while (stack.length) end[stack.pop()] = N;\n"
    "/* outer[n]: no caller of n is the same function, so n's total counts once\n"
    " * for its function (recursion is not counted twice), as in `report`. */\n"
    "(function () {\n"
    "  var on = new Int32Array(F.length / 3), path = [];\n"
    "  for (var n = 0; n < N; n++) {\n"
    "    while (path.length > depth[n]) on[fnOf[path.pop()]]--;\n"
    "    path.push(n);\n"
    "    outer[n] = n > 0 && on[fnOf[n]] === 0 ? 1 : 0;\n"
    "    on[fnOf[n]]++;\n"
    "  }\n"
    "})();\n"
    "function fname(f) { return f === 0 ? 'all' : S[F[3 * f]]; }\n"
    "function fwhere(f) {\n"
    "  var file = S[F[3 * f + 1]], line = F[3 * f + 2];\n"
    "  return file ? file + (line ? ':' + line : '') : '';\n"
    "}\n"
    "var R = D.recs, NR = R.length / 5, LO = D.loff, LB = D.lab, NL = LO.length - 1;\n"
    "/* The timeline's buckets (one or more consecutive profiles each). */\n"
    "var P = D.profs || [], NP = P.length / 2, PC = D.pcount || [], NONE = '(none)';\n"
    "/* Label keys and their values (name ids), from the label sets. */\n"
    "var keys = {}, keyList = [];\n"
    "for (i = 0; i < LB.length; i += 2) {\n"
    "  var k = S[LB[i]];\n"
    "  if (!keys[k]) { keys[k] = {}; keyList.push(k); }\n"
    "  keys[k][S[LB[i + 1]]] = 1;\n"
    "}\n"
    "keyList.sort();\n"
    "function labelOf(ls, key) {\n"
    "  for (var j = LO[ls]; j < LO[ls + 1]; j += 2) if (S[LB[j]] === key) return S[LB[j + 1]];\n"
    "  return null;\n"
    "}\n"
    "/* A span's name, shown beside its id: from the label sets holding both. */\n"
    "var spanName = {};\n"
    "for (i = 0; i < NL; i++) {\n"
    "  var sid = labelOf(i, 'span_id'), sn = labelOf(i, 'span_name');\n"
    "  if (sid !== null && sn !== null) spanName[sid] = sn;\n"
    "}\n"
    "function valueCell(key, v) {\n"
    "  var td = el('td', v, 'fn');\n"
    "  if (key === 'span_id' && spanName[v]) td.appendChild(el('span', ' ' + spanName[v], 'sn'));\n"
    "  return td;\n"
    "}\n"
    "\n"
    "/* A selection is {key: [values]}: keys ANDed, a key's values ORed. Its text\n"
    " * form is the CLI's: key=value,key=value. */\n"
    "function parseSel(text) {\n"
    "  var sel = {}, parts = (text || '').split(',');\n"
    "  for (var j = 0; j < parts.length; j++) {\n"
    "    var p = parts[j], at = p.indexOf('=');\n"
    "    if (at <= 0) continue;\n"
    "    var k = p.slice(0, at).trim(), v = p.slice(at + 1);\n"
    "    (sel[k] || (sel[k] = [])).push(v);\n"
    "  }\n"
    "  return sel;\n"
    "}\n"
    "function selText(sel) {\n"
    "  var out = [];\n"
    "  for (var k in sel) for (var j = 0; j < sel[k].length; j++) out.push(k + '=' + sel[k][j]);\n"
    "  return out.join(',');\n"
    "}\n"
    "function lsMatch(sel) {\n"
    "  var ok = new Uint8Array(NL);\n"
    "  for (var ls = 0; ls < NL; ls++) {\n"
    "    var good = 1;\n"
    "    for (var k in sel) {\n"
    "      var v = labelOf(ls, k);  /* (none): samples without the label */\n"
    "      if (sel[k].indexOf(v === null ? NONE : v) < 0) { good = 0; break; }\n"
    "    }\n"
    "    ok[ls] = good;\n"
    "  }\n"
    "  return ok;\n"
    "}\n"
    "/* Node totals, self values and sample counts of the records a selection\n"
    " * keeps; children come after parents, so a backward pass sums subtrees. */\n"
    "/* Buckets in the timeline's brushed range (all without one): those whose\n"
    " * middle falls in it. */\n"
    "function profMask() {\n"
    "  var m = new Uint8Array(NP);\n"
    "  for (var p = 0; p < NP; p++) {\n"
    "    var mid = P[2 * p] + P[2 * p + 1] / 2;\n"
    "    m[p] = st.t0 === null || (mid >= st.t0 && mid < st.t1) ? 1 : 0;\n"
    "  }\n"
    "  return m;\n"
    "}\n"
    "function compute(sel) {\n"
    "  var ok = lsMatch(sel), pok = profMask(), t = new Float64Array(N), s = new Float64Array(N);\n"
    "  var c = new Float64Array(N), cs = new Float64Array(N);\n"
    "  for (var j = 0; j < NR; j++) {\n"
    "    if (!ok[R[5 * j + 1]] || !pok[R[5 * j + 4]]) continue;\n"
    "    s[R[5 * j]] += R[5 * j + 2]; cs[R[5 * j]] += R[5 * j + 3];\n"
    "  }\n"
    "  for (var n = N - 1; n >= 0; n--) {\n"
    "    t[n] += s[n]; c[n] += cs[n];\n"
    "    if (n > 0) { t[parent[n]] += t[n]; c[parent[n]] += c[n]; }\n"
    "  }\n"
    "  return {total: t, self: s, count: c, ok: ok, pok: pok};\n"
    "}\n"
    "\n"
    "function group3(s) {\n"
    "  var out = '';\n"
    "  while (s.length > 3) { out = ',' + s.slice(-3) + out; s = s.slice(0, -3); }\n"
    "  return s + out;\n"
    "}\n"
    "/* The same formatting as the C report's, so the two can be compared. */\n"
    "function fmt(v) {\n"
    "  var u = D.unit;\n"
    "  if (u === 'nanoseconds') {\n"
    "    if (v >= 1e9) return (v / 1e9).toFixed(2) + ' s';\n"
    "    if (v >= 1e6) return (v / 1e6).toFixed(2) + ' ms';\n"
    "    if (v >= 1e3) return (v / 1e3).toFixed(2) + ' us';\n"
    "    return v + ' ns';\n"
    "  }\n"
    "  if (u === 'bytes') {\n"
    "    var k = 0, units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];\n"
    "    while (v >= 1024 && k < 4) { v /= 1024; k++; }\n"
    "    return (k ? v.toFixed(2) : v) + ' ' + units[k];\n"
    "  }\n"
    "  return String(v);\n"
    "}\n"
    "function pct(v, of) { return (of > 0 ? 100 * v / of : 0).toFixed(2) + '%'; }\n"
    "var unitWord = D.unit === 'nanoseconds' ? 'time' : (!D.unit || D.unit === 'count') ? 'count' : D.unit;\n"
    "function $(id) { return document.getElementById(id); }\n"
    "function el(tag, text, cls) {\n"
    "  var e = document.createElement(tag);\n"
    "  if (text !== undefined) e.textContent = text;\n"
    "  if (cls) e.className = cls;\n"
    "  return e;\n"
    "}\n"
    "\n"
    "/* ------------------------------------------------------------ state */\n"
    "var st = {filter: {}, group: '', a: '', b: '', fn: -1, mode: 'flame', sort: 'self', t0: null, t1: null};\n"
    "var cur = null, ALL = 0, A = null, B = null;\n"
    "function readHash() {\n"
    "  var h = location.hash.replace(/^#/, '') || D.view || '';\n"
    "  var q = new URLSearchParams(h);\n"
    "  st.filter = parseSel(q.get('filter'));\n"
    "  st.group = q.get('group') === null && !h ? autoGroup() : q.get('group') || '';\n"
    "  var t0 = parseFloat(q.get('from')), t1 = parseFloat(q.get('until'));\n"
    "  st.t0 = isFinite(t0) && isFinite(t1) && t1 > t0 ? t0 : null;\n"
    "  st.t1 = st.t0 === null ? null : t1;\n"
    "  st.a = q.get('a') || ''; st.b = q.get('b') || '';\n"
    "  st.mode = q.get('diff') !== null || st.a || st.b ? 'diff' : 'flame';\n"
    "  st.fn = -1;\n"
    "  var fn = q.get('fn');\n"
    "  if (fn) for (var f = 1; f < F.length / 3; f++) if (fname(f) === fn) st.fn = f;\n"
    "}\n"
    "function writeHash() {\n"
    "  var q = new URLSearchParams();\n"
    "  var ft = selText(st.filter);\n"
    "  if (ft) q.set('filter', ft);\n"
    "  q.set('group', st.group);\n"
    "  if (st.t0 !== null) { q.set('from', String(st.t0)); q.set('until', String(st.t1)); }\n"
    "  if (st.mode === 'diff') { q.set('diff', ''); q.set('a', st.a); q.set('b', st.b); }\n"
    "  if (st.fn > 0) q.set('fn', fname(st.fn));\n"
    "  var h = q.toString();\n"
    "  if (location.hash.replace(/^#/, '') !== h) history.replaceState(null, '', '#' + h);\n"
    "}\n"
    "\n"
    "/* ------------------------------------------------------ flame graph */\n"
    "var view = $('view'), canvas = $('fg'), spacer = $('spacer'), tip = $('tip');\n"
    "var search = $('search'), matchEl = $('match'), ctx = canvas.getContext('2d');\n"
    "var ROW = 18, MINW = 1;\n"
    "var FONT = '12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace';\n"
    "var focus = 0, rows = [], groups = [], W = 0, charW = 7, matchName = null, pending = false;\n"
    "var colors = {};\n"
    "function color(f) {\n"
    "  var c = colors[f];\n"
    "  if (c) return c;\n"
    "  var s = fname(f), h = 2166136261;\n"
    "  for (var k = 0; k < s.length; k++) { h ^= s.charCodeAt(k); h = Math.imul(h, 16777619); }\n"
    "  h >>>= 0;\n"
    "  c = 'hsl(' + (6 + h % 44) + ',' + (65 + (h >>> 8) % 25) + '%,' + (52 + (h >>> 16) % 14) + '%)';\n"
    "  return (colors[f] = c);\n"
    "}\n"
    "/* Diff colour: red where B's share grew, green where it shrank. */\n"
    "function diffColor(n) {\n"
    "  var d = share(totB, B, n) - share(totA, A, n), m = Math.min(1, Math.abs(d) * 4);\n"
    "  var l = Math.round(92 - 40 * m);\n"
    "  return d > 0 ? 'hsl(0,85%,' + l + '%)' : d < 0 ? 'hsl(120,55%,' + l + '%)' : 'hsl(0,0%,86%)';\n"
    "}\n"
    "function share(t, base, n) { return base && base.total[0] > 0 ? t[n] / base.total[0] : 0; }\n"
    "function matched(n) { return matchName !== null && n > 0 && matchName[fnOf[n]] === 1; }\n"
    "function put(d, x, w, n) { (rows[d] || (rows[d] = [])).push(x, w, n); }\n"
    "function layout() {\n"
    "  W = view.clientWidth;\n"
    "  rows = []; groups = [];\n"
    "  for (var a = focus; a >= 0; a = parent[a]) put(depth[a], 0, W, a);\n"
    "  var scale = total[focus] > 0 ? W / total[focus] : 0;\n"
    "  var queue = [focus], qi = 0;\n"
    "  x0[focus] = 0;\n"
    "  while (qi < queue.length) {\n"
    "    var p = queue[qi++], cx = x0[p], runX = 0, runV = 0, runN = 0;\n"
    "    for (var c = p + 1; c <= end[p]; c = end[c]) {\n"
    "      var w = c < end[p] ? total[c] * scale : Infinity;\n"
    "      if (w < MINW) {\n"
    "        if (runN === 0) runX = cx;\n"
    "        runV += total[c]; runN++; cx += total[c];\n"
    "        continue;\n"
    "      }\n"
    "      if (runN > 0 && runV * scale >= 0.5) {\n"
    "        put(depth[p] + 1, runX * scale, runV * scale, -1 - groups.length);\n"
    "        groups.push([runN, runV]);\n"
    "      }\n"
    "      runN = runV = 0;\n"
    "      if (c === end[p]) break;\n"
    "      x0[c] = cx;\n"
    "      put(depth[c], cx * scale, w, c);\n"
    "      queue.push(c);\n"
    "      cx += total[c];\n"
    "    }\n"
    "  }\n"
    "  fit();\n"
    "}\n"
    "/* The graph's pane is as tall as its rows, at most what the window has\n"
    " * below the pane's top (then it scrolls); the label panel scrolls beside. */\n"
    "function fit() {\n"
    "  var avail = Math.max(8 * ROW, window.innerHeight - (view.getBoundingClientRect().top + window.scrollY) - 8);\n"
    "  var h = Math.max(ROW, Math.min(rows.length * ROW, avail));\n"
    "  view.style.height = h + 'px';\n"
    "  $('labels').style.maxHeight = Math.max(h, 12 * ROW) + 'px';\n"
    "}\n"
    "function draw() {\n"
    "  pending = false;\n"
    "  var dpr = window.devicePixelRatio || 1;\n"
    "  var contentH = rows.length * ROW, H = Math.max(1, Math.min(view.clientHeight, contentH));\n"
    "  if (canvas.width !== Math.round(W * dpr) || canvas.height !== Math.round(H * dpr)) {\n"
    "    canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);\n"
    "    canvas.style.width = W + 'px'; canvas.style.height = H + 'px';\n"
    "  }\n"
    "  spacer.style.height = Math.max(0, contentH - H) + 'px';\n"
    "  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);\n"
    "  ctx.clearRect(0, 0, W, H);\n"
    "  ctx.font = FONT; ctx.textBaseline = 'middle';\n"
    "  charW = ctx.measureText('MMMMMMMMMM').width / 10 || 7;\n"
    "  var top = view.scrollTop, first = Math.floor(top / ROW);\n"
    "  var last = Math.min(rows.length, Math.ceil((top + H) / ROW));\n"
    "  for (var d = first; d < last; d++) {\n"
    "    var Rw = rows[d], y = d * ROW - top;\n"
    "    if (!Rw) continue;\n"
    "    for (var k = 0; k < Rw.length; k += 3) {\n"
    "      var x = Rw[k], w = Rw[k + 1], n = Rw[k + 2];\n"
    "      var fw = w > 2 ? w - 1 : w;\n"
    "      if (n < 0) {\n"
    "        ctx.globalAlpha = 1; ctx.fillStyle = '#d0d0d0';\n"
    "        ctx.fillRect(x, y, fw, ROW - 1);\n"
    "        continue;\n"
    "      }\n"
    "      ctx.globalAlpha = depth[n] < depth[focus] ? 0.55 : 1;\n"
    "      ctx.fillStyle = matched(n) ? '#c040e8' : st.mode === 'diff' ? diffColor(n) :\n"
    "        n === 0 || fnOf[n] !== st.fn ? color(fnOf[n]) : '#3a7bd5';\n"
    "      ctx.fillRect(x, y, fw, ROW - 1);\n"
    "      var room = Math.floor((w - 6) / charW);\n"
    "      if (room < 3) continue;\n"
    "      var label = fname(fnOf[n]);\n"
    "      if (label.length > room) label = label.slice(0, room - 1) + '\\u2026';\n"
    "      ctx.fillStyle = '#111';\n"
    "      ctx.fillText(label, x + 3, y + ROW / 2);\n"
    "    }\n"
    "  }\n"
    "  ctx.globalAlpha = 1;\n"
    "}\n"
    "function redraw() { if (!pending) { pending = true; window.requestAnimationFrame(draw); } }\n"
    "function hit(ev) {\n"
    "  var b = canvas.getBoundingClientRect();\n"
    "  var mx = ev.clientX - b.left, d = Math.floor((ev.clientY - b.top + view.scrollTop) / ROW);\n"
    "  var Rw = rows[d];\n"
    "  if (!Rw) return null;\n"
    "  for (var k = 0; k < Rw.length; k += 3)\n"
    "    if (mx >= Rw[k] && mx < Rw[k] + Rw[k + 1]) return Rw[k + 2];\n"
    "  return null;\n"
    "}\n"
    "function tipLine(text, bold) { tip.appendChild(el(bold ? 'b' : 'div', text)); }\n"
    "function showTip(ev, n) {\n"
    "  tip.textContent = '';\n"
    "  if (n < 0) {\n"
    "    var g = groups[-1 - n];\n"
    "    tipLine(g[0] + ' frames narrower than a pixel', true);\n"
    "    tipLine('each too narrow to draw at this zoom');\n"
    "  } else {\n"
    "    tipLine(fname(fnOf[n]), true);\n"
    "    var file = S[F[3 * fnOf[n] + 1]];\n"
    "    if (file) tipLine(file + (lineOf[n] ? ':' + lineOf[n] : ''));\n"
    "    if (st.mode === 'diff') {\n"
    "      tipLine('A: ' + fmt(totA[n]) + ' (' + pct(totA[n], A.total[0]) + ')');\n"
    "      tipLine('B: ' + fmt(totB[n]) + ' (' + pct(totB[n], B.total[0]) + ')');\n"
    "    } else {\n"
    "      tipLine('total: ' + fmt(total[n]) + ' (' + pct(total[n], ALL) + ' of the selection), ' +\n"
    "              cur.count[n] + ' samples');\n"
    "      tipLine('self: ' + fmt(self[n]) + ' (' + pct(self[n], ALL) + ')');\n"
    "      if (focus !== 0 && depth[n] > depth[focus])\n"
    "        tipLine(pct(total[n], total[focus]) + ' of the zoomed frame');\n"
    "    }\n"
    "    tipLine('click: zoom \\u00b7 shift-click: sandwich');\n"
    "  }\n"
    "  tip.style.display = 'block';\n"
    "  var tx = ev.clientX + 14, ty = ev.clientY + 14;\n"
    "  if (tx + tip.offsetWidth > window.innerWidth) tx = Math.max(0, ev.clientX - tip.offsetWidth - 8);\n"
    "  if (ty + tip.offsetHeight > window.innerHeight) ty = Math.max(0, ev.clientY - tip.offsetHeight - 8);\n"
    "  tip.style.left = tx + 'px'; tip.style.top = ty + 'px';\n"
    "}\n"
    "function zoom(n) {\n"
    "  focus = n;\n"
    "  layout();\n"
    "  view.scrollTop = Math.max(0, (depth[focus] - 2) * ROW);\n"
    "  draw();\n"
    "}\n"
    "function runSearch() {\n"
    "  var term = search.value.trim().toLowerCase();\n"
    "  if (!term) { matchName = null; matchEl.textContent = ''; redraw(); return; }\n"
    "  matchName = new Uint8Array(F.length / 3);\n"
    "  for (var f = 1; f < F.length / 3; f++)\n"
    "    if (fname(f).toLowerCase().indexOf(term) >= 0) matchName[f] = 1;\n"
    "  var sum = 0, frames = 0, j;\n"
    "  for (j = 1; j < N; j++) if (matched(j) && total[j] > 0) frames++;\n"
    "  for (j = 1; j < N;) { if (matched(j)) { sum += total[j]; j = end[j]; } else j++; }\n"
    "  matchEl.textContent = frames ? 'Matched ' + frames + ' frames: ' + fmt(sum) + ' (' + pct(sum, ALL) + ')'\n"
    "                               : 'No match';\n"
    "  redraw();\n"
    "}\n"
    "\n"
    "/* ----------------------------------------------------------- tables */\n"
    "/* Per function: self, total (recursion once) and samples of a computed\n"
    " * selection. */\n"
    "function tally(c) {\n"
    "  var nf = F.length / 3, out = {self: new Float64Array(nf), total: new Float64Array(nf),\n"
    "                                count: new Float64Array(nf)};\n"
    "  for (var n = 1; n < N; n++) {\n"
    "    out.self[fnOf[n]] += c.self[n];\n"
    "    if (outer[n]) { out.total[fnOf[n]] += c.total[n]; out.count[fnOf[n]] += c.count[n]; }\n"
    "  }\n"
    "  return out;\n"
    "}\n"
    "function table(id, head, body) {\n"
    "  var t = $(id);\n"
    "  t.textContent = '';\n"
    "  var tr = el('tr');\n"
    "  head.forEach(function (h) {\n"
    "    var th = el('th', h[0]);\n"
    "    if (h[1]) { th.dataset.sort = h[1]; th.className = st.sort === h[1] ? 'sorted' : ''; }\n"
    "    tr.appendChild(th);\n"
    "  });\n"
    "  var thead = el('thead'); thead.appendChild(tr); t.appendChild(thead);\n"
    "  var tb = el('tbody');\n"
    "  body.forEach(function (r) { tb.appendChild(r); });\n"
    "  t.appendChild(tb);\n"
    "}\n"
    "function row(cells, data) {\n"
    "  var tr = el('tr');\n"
    "  cells.forEach(function (c) { tr.appendChild(el('td', c[0], c[1])); });\n"
    "  for (var k in data) tr.dataset[k] = data[k];\n"
    "  return tr;\n"
    "}\n"
    "var TOPN = 200;\n"
    "function renderTop() {\n"
    "  var nf = F.length / 3, fs = [], f;\n"
    "  if (st.mode === 'diff') {\n"
    "    var ta = tally(A), tb = tally(B), all1 = A.total[0], all2 = B.total[0];\n"
    "    for (f = 1; f < nf; f++) if (ta.self[f] || tb.self[f]) fs.push(f);\n"
    "    var ch = function (f) { return (all2 > 0 ? 100 * tb.self[f] / all2 : 0) - (all1 > 0 ? 100 * ta.self[f] / all1 : 0); };\n"
    "    fs.sort(function (x, y) { return Math.abs(ch(y)) - Math.abs(ch(x)) || (fname(x) < fname(y) ? -1 : 1); });\n"
    "    table('top', [['A self (' + unitWord + ')'], ['A%'], ['B self (' + unitWord + ')'], ['B%'],\n"
    "                  ['change (points)'], ['function'], ['file:line']],\n"
    "      fs.slice(0, TOPN).map(function (f) {\n"
    "        var c = ch(f);\n"
    "        return row([[fmt(ta.self[f]), 'n'], [pct(ta.self[f], all1), 'n'], [fmt(tb.self[f]), 'n'],\n"
    "                    [pct(tb.self[f], all2), 'n'], [(c >= 0 ? '+' : '') + c.toFixed(2) + '%', 'n'],\n"
    "                    [fname(f), 'fn'], [fwhere(f), 'w']],\n"
    "                   {fn: f, a: ta.self[f], b: tb.self[f], change: c.toFixed(2)});\n"
    "      }));\n"
    "    return;\n"
    "  }\n"
    "  var t = tally(cur);\n"
    "  for (f = 1; f < nf; f++) if (t.total[f] > 0 || t.count[f] > 0) fs.push(f);\n"
    "  var key = st.sort;\n"
    "  fs.sort(function (x, y) {\n"
    "    if (key === 'name') return fname(x) < fname(y) ? -1 : fname(x) > fname(y) ? 1 : 0;\n"
    "    return t[key][y] - t[key][x] || t.total[y] - t.total[x] || (fname(x) < fname(y) ? -1 : 1);\n"
    "  });\n"
    "  table('top', [['self (' + unitWord + ')', 'self'], ['self%'], ['total (' + unitWord + ')', 'total'],\n"
    "                ['total%'], ['samples (count)', 'count'], ['function', 'name'], ['file:line']],\n"
    "    fs.slice(0, TOPN).map(function (f) {\n"
    "      return row([[fmt(t.self[f]), 'n'], [pct(t.self[f], ALL), 'n'], [fmt(t.total[f]), 'n'],\n"
    "                  [pct(t.total[f], ALL), 'n'], [String(t.count[f]), 'n'], [fname(f), 'fn'],\n"
    "                  [fwhere(f), 'w']],\n"
    "                 {fn: f, self: t.self[f], total: t.total[f], count: t.count[f]});\n"
    "    }));\n"
    "  $('topnote').textContent = fs.length > TOPN ? 'first ' + TOPN + ' of ' + fs.length + ' functions' :\n"
    "    fs.length + ' functions';\n"
    "}\n"
    "/* The breakdown of a page opened with no view: the label (not an id, a\n"
    " * path or a thread) whose 2-50 values cover the most, as the Node and Ruby\n"
    " * demos open on their endpoints; the application's own labels before\n"
    " * span_name. */\n"
    "function autoGroup() {\n"
    "  var skip = {source: 1, span_id: 1, trace_id: 1, pid: 1, thread_id: 1, thread_name: 1};\n"
    "  var best = '', bestV = 0;\n"
    "  keyList.forEach(function (k) {\n"
    "    var n = Object.keys(keys[k]).length, v = 0;\n"
    "    if (skip[k] || n < 2 || n > 50) return;\n"
    "    for (var j = 0; j < NR; j++) if (labelOf(R[5 * j + 1], k) !== null) v += R[5 * j + 2];\n"
    "    if (k === 'span_name') v /= 4;\n"
    "    if (v > bestV) { best = k; bestV = v; }\n"
    "  });\n"
    "  return best;\n"
    "}\n"
    "/* Value and samples per value of key (NONE: without it) over the records\n"
    " * that pass ok (label sets) and pok (profiles), largest first. */\n"
    "function amounts(key, ok, pok) {\n"
    "  var by = {}, names = [];\n"
    "  for (var j = 0; j < NR; j++) {\n"
    "    if (!ok[R[5 * j + 1]] || !pok[R[5 * j + 4]]) continue;\n"
    "    var v = labelOf(R[5 * j + 1], key);\n"
    "    if (v === null) v = NONE;\n"
    "    if (!by[v]) { by[v] = [0, 0]; names.push(v); }\n"
    "    by[v][0] += R[5 * j + 2]; by[v][1] += R[5 * j + 3];\n"
    "  }\n"
    "  names.sort(function (x, y) { return by[y][0] - by[x][0] || by[y][1] - by[x][1] || (x < y ? -1 : 1); });\n"
    "  return {by: by, names: names};\n"
    "}\n"
    "\n"
    "function renderBreakdown() {\n"
    "  var sel = $('group'), key = st.group;\n"
    "  sel.value = key;\n"
    "  $('bdsec').hidden = !key;\n"
    "  if (!key) { $('bd').textContent = ''; return; }\n"
    "  /* Shares of the selection (in a diff too, where the graph's widths are\n"
    "   * shares of A plus shares of B). */\n"
    "  var am = amounts(key, cur.ok, cur.pok), by = am.by, names = am.names, all = cur.total[0];\n"
    "  table('bd', [[D.type + ' (' + unitWord + ')'], ['share'], ['samples (count)'], [key]],\n"
    "    names.map(function (v) {\n"
    "      var tr = row([[fmt(by[v][0]), 'n'], [pct(by[v][0], all), 'n'], [String(by[v][1]), 'n']],\n"
    "                   {value: by[v][0], count: by[v][1], label: v});\n"
    "      tr.appendChild(valueCell(key, v));\n"
    "      tr.title = v === NONE ? 'click: samples without ' + key : 'click: filter on ' + key + '=' + v;\n"
    "      tr.addEventListener('click', function () { st.filter[key] = [v]; update(); });\n"
    "      return tr;\n"
    "    }));\n"
    "}\n"
    "function renderLabels() {\n"
    "  var box = $('labels');\n"
    "  box.textContent = '';\n"
    "  var pok = profMask();\n"
    "  keyList.forEach(function (k) {\n"
    "    /* Each value's time among the samples the other keys' filters keep,\n"
    "     * so ticking one value leaves its siblings' amounts in view. */\n"
    "    var others = {};\n"
    "    for (var o in st.filter) if (o !== k) others[o] = st.filter[o];\n"
    "    var am = amounts(k, lsMatch(others), pok), base = 0;\n"
    "    am.names.forEach(function (v) { base += am.by[v][0]; });\n"
    "    for (var v0 in keys[k]) if (!am.by[v0]) am.names.push(v0);\n"
    "    var vals = am.names, d = el('details'), s = el('summary', k + ' (' + Object.keys(keys[k]).length + ')');\n"
    "    d.dataset.key = k;\n"
    "    if (st.filter[k]) d.open = true;\n"
    "    d.appendChild(s);\n"
    "    vals.slice(0, 300).forEach(function (v) {\n"
    "      var lab = el('label'), cb = el('input'), amt = am.by[v] ? am.by[v][0] : 0;\n"
    "      lab.dataset.value = v; lab.dataset.amount = amt;\n"
    "      lab.title = k + '=' + v + (k === 'span_id' && spanName[v] ? ' (' + spanName[v] + ')' : '');\n"
    "      cb.type = 'checkbox';\n"
    "      cb.checked = !!(st.filter[k] && st.filter[k].indexOf(v) >= 0);\n"
    "      cb.addEventListener('change', function () {\n"
    "        var cur = st.filter[k] || [];\n"
    "        if (cb.checked) cur.push(v); else cur = cur.filter(function (x) { return x !== v; });\n"
    "        if (cur.length) st.filter[k] = cur; else delete st.filter[k];\n"
    "        update();\n"
    "      });\n"
    "      /* A span: its name first (ids alone tell nothing), then its id's start. */\n"
    "      var name = k === 'span_id' && spanName[v] ? el('span', spanName[v] + ' ', 'v') : el('span', v, 'v');\n"
    "      if (k === 'span_id' && spanName[v]) name.appendChild(el('span', v.slice(0, 8) + '\\u2026', 'sn'));\n"
    "      lab.appendChild(cb); lab.appendChild(name);\n"
    "      lab.appendChild(el('span', fmt(amt) + ' ' + pct(amt, base), 'amt'));\n"
    "      d.appendChild(lab);\n"
    "    });\n"
    "    if (vals.length > 300) d.appendChild(el('div', (vals.length - 300) + ' more: type them in the filter', 'hint'));\n"
    "    box.appendChild(d);\n"
    "  });\n"
    "  var g = $('group');\n"
    "  if (g.options.length !== keyList.length + 1) {\n"
    "    g.textContent = '';\n"
    "    g.appendChild(el('option', '(no breakdown)')).value = '';\n"
    "    keyList.forEach(function (k) { g.appendChild(el('option', k)).value = k; });\n"
    "  }\n"
    "}\n"
    "/* Sandwich: the merged callers (inverted) and callees of one function. */\n"
    "function merged(f, up) {\n"
    "  var tree = {name: fname(f), v: 0, kids: {}};\n"
    "  for (var n = 1; n < N; n++) {\n"
    "    if (fnOf[n] !== f || !outer[n] || total[n] <= 0) continue;\n"
    "    tree.v += total[n];\n"
    "    if (up) {\n"
    "      var node = tree, v = total[n];\n"
    "      for (var p = parent[n]; p > 0; p = parent[p]) {\n"
    "        var nm = fname(fnOf[p]);\n"
    "        node = node.kids[nm] || (node.kids[nm] = {name: nm, v: 0, kids: {}});\n"
    "        node.v += v;\n"
    "      }\n"
    "    } else {\n"
    "      (function walk(m, into) {\n"
    "        for (var c = m + 1; c < end[m]; c = end[c]) {\n"
    "          if (total[c] <= 0) continue;\n"
    "          var nm = fname(fnOf[c]), k = into.kids[nm] || (into.kids[nm] = {name: nm, v: 0, kids: {}});\n"
    "          k.v += total[c];\n"
    "          walk(c, k);\n"
    "        }\n"
    "      })(n, tree);\n"
    "    }\n"
    "  }\n"
    "  return tree;\n"
    "}\n"
    "function treeRows(tree, out, d) {\n"
    "  if (out.length >= 300) return;\n"
    "  out.push(row([[fmt(tree.v), 'n'], [pct(tree.v, ALL), 'n'], ['\\u2003'.repeat(d) + tree.name, 'fn']],\n"
    "               {value: tree.v, depth: d}));\n"
    "  Object.keys(tree.kids).map(function (k) { return tree.kids[k]; })\n"
    "    .sort(function (x, y) { return y.v - x.v; })\n"
    "    .forEach(function (k) { treeRows(k, out, d + 1); });\n"
    "}\n"
    "function renderSandwich() {\n"
    "  var box = $('sandwich');\n"
    "  if (st.fn <= 0 || st.mode === 'diff') { box.hidden = true; return; }\n"
    "  box.hidden = false;\n"
    "  $('swname').textContent = fname(st.fn) + (fwhere(st.fn) ? ' \\u2014 ' + fwhere(st.fn) : '');\n"
    "  var up = [], down = [];\n"
    "  treeRows(merged(st.fn, true), up, 0);\n"
    "  treeRows(merged(st.fn, false), down, 0);\n"
    "  var head = [['total (' + unitWord + ')'], ['share'], ['function']];\n"
    "  table('callers', head, up);\n"
    "  table('callees', head, down);\n"
    "  redraw();\n"
    "}\n"
    "\n"
    "/* --------------------------------------------------------- timeline */\n"
    "/* One bar per profile: its value per second of its period (CPU per period\n"
    " * for a CPU profile) under the current filter, across all the profiles'\n"
    " * time. Dragging selects a time range (the profiles whose middle falls in\n"
    " * it), a click one profile; every view then counts only those. */\n"
    "var tl = $('tl'), tlx = tl.getContext('2d'), T0 = Infinity, T1 = -Infinity, dragX = null;\n"
    "for (i = 0; i < NP; i++) { T0 = Math.min(T0, P[2 * i]); T1 = Math.max(T1, P[2 * i] + P[2 * i + 1]); }\n"
    "$('timeline').hidden = NP < 2 || !(T1 > T0);\n"
    "function tlX(t, w) { return (t - T0) / (T1 - T0) * w; }\n"
    "function tlT(x, w) { return T0 + Math.max(0, Math.min(1, x / w)) * (T1 - T0); }\n"
    "function clock(t) { return new Date(t).toLocaleTimeString(); }\n"
    "function renderTimeline(from, to) {\n"
    "  if ($('timeline').hidden) return;\n"
    "  var w = tl.clientWidth, h = tl.clientHeight, dpr = window.devicePixelRatio || 1, p;\n"
    "  tl.width = Math.round(w * dpr); tl.height = Math.round(h * dpr);\n"
    "  tlx.setTransform(dpr, 0, 0, dpr, 0, 0);\n"
    "  var ok = lsMatch(st.filter), per = new Float64Array(NP), top = 0, pok = profMask(), n = 0;\n"
    "  for (var j = 0; j < NR; j++) if (ok[R[5 * j + 1]]) per[R[5 * j + 4]] += R[5 * j + 2];\n"
    "  for (p = 0; p < NP; p++) { per[p] /= Math.max(1, P[2 * p + 1]) / 1000; top = Math.max(top, per[p]); n += pok[p] * PC[p]; }\n"
    "  tlx.fillStyle = '#f7f7f7'; tlx.fillRect(0, 0, w, h);\n"
    "  if (from === undefined && st.t0 !== null) { from = st.t0; to = st.t1; }\n"
    "  if (from !== undefined) {\n"
    "    tlx.fillStyle = '#cfe0fa';\n"
    "    tlx.fillRect(tlX(from, w), 0, tlX(to, w) - tlX(from, w), h);\n"
    "  }\n"
    "  for (p = 0; p < NP; p++) {\n"
    "    var x = tlX(P[2 * p], w), bw = Math.max(1, tlX(P[2 * p] + P[2 * p + 1], w) - x - 1);\n"
    "    var bh = top > 0 ? Math.max(per[p] > 0 ? 1 : 0, per[p] / top * (h - 4)) : 0;\n"
    "    tlx.fillStyle = pok[p] ? '#e8743b' : '#c4c4c4';\n"
    "    tlx.fillRect(x, h - bh, bw, bh);\n"
    "  }\n"
    "  var box = $('timeline');\n"
    "  box.dataset.profiles = D.profiles; box.dataset.buckets = NP; box.dataset.selected = n; box.dataset.peak = top;\n"
    "  if (st.t0 !== null) { box.dataset.from = st.t0; box.dataset.until = st.t1; }\n"
    "  else { delete box.dataset.from; delete box.dataset.until; }\n"
    "  $('tlsum').textContent = (st.t0 === null ? 'all ' + D.profiles + ' profiles' :\n"
    "    n + ' of ' + D.profiles + ' profiles, ' + clock(st.t0) + ' \\u2013 ' + clock(st.t1)) +\n"
    "    (NP < D.profiles ? ' (bars of ' + Math.ceil(D.profiles / NP) + ')' : '') + ' \\u00b7 ' +\n"
    "    new Date(T0).toLocaleString() + ' \\u2013 ' + clock(T1) + ' \\u00b7 peak ' + fmt(Math.round(top)) +\n"
    "    ' per second \\u00b7 drag to select a time range, click a bar for one profile';\n"
    "  $('tlall').hidden = st.t0 === null;\n"
    "}\n"
    "function tlPos(ev) { return ev.clientX - tl.getBoundingClientRect().left; }\n"
    "tl.addEventListener('mousedown', function (ev) { dragX = tlPos(ev); ev.preventDefault(); });\n"
    "window.addEventListener('mousemove', function (ev) {\n"
    "  if (dragX === null) return;\n"
    "  var w = tl.clientWidth, x = tlPos(ev);\n"
    "  renderTimeline(tlT(Math.min(dragX, x), w), tlT(Math.max(dragX, x), w));\n"
    "});\n"
    "window.addEventListener('mouseup', function (ev) {\n"
    "  if (dragX === null) return;\n"
    "  var w = tl.clientWidth, x = tlPos(ev), a = Math.min(dragX, x), b = Math.max(dragX, x);\n"
    "  dragX = null;\n"
    "  if (b - a >= 3) { st.t0 = Math.floor(tlT(a, w)); st.t1 = Math.ceil(tlT(b, w)); }\n"
    "  else {\n"
    "    var t = tlT(x, w);\n"
    "    st.t0 = st.t1 = null;\n"
    "    for (var p = 0; p < NP; p++)\n"
    "      if (t >= P[2 * p] && t < P[2 * p] + P[2 * p + 1]) { st.t0 = P[2 * p]; st.t1 = P[2 * p] + P[2 * p + 1]; }\n"
    "  }\n"
    "  update();\n"
    "});\n"
    "$('tlall').addEventListener('click', function () { st.t0 = st.t1 = null; update(); });\n"
    "\n"
    "/* ----------------------------------------------------------- update */\n"
    "function update() {\n"
    "  writeHash();\n"
    "  $('filter').value = selText(st.filter);\n"
    "  $('a').value = st.a; $('b').value = st.b;\n"
    "  $('mode').textContent = st.mode === 'diff' ? 'Leave diff' : 'Diff\\u2026';\n"
    "  $('diffbar').hidden = st.mode !== 'diff';\n"
    "  cur = compute(st.filter);\n"
    "  if (st.mode === 'diff') {\n"
    "    A = compute(parseSel(st.a)); B = compute(parseSel(st.b));\n"
    "    totA = A.total; totB = B.total;\n"
    "    /* Widths: both selections' shares side by side, so each is visible. */\n"
    "    for (var n = 0; n < N; n++) {\n"
    "      total[n] = share(totA, A, n) + share(totB, B, n);\n"
    "      self[n] = 0;\n"
    "    }\n"
    "    ALL = total[0];\n"
    "    $('diffsum').textContent = 'A: ' + fmt(A.total[0]) + ', ' + A.count[0] + ' samples \\u00b7 B: ' +\n"
    "      fmt(B.total[0]) + ', ' + B.count[0] + ' samples';\n"
    "    $('diffsum').dataset.a = A.total[0]; $('diffsum').dataset.b = B.total[0];\n"
    "  } else {\n"
    "    total.set(cur.total); self.set(cur.self);\n"
    "    ALL = cur.total[0];\n"
    "  }\n"
    "  var info = (D.type ? D.type + ' ' + unitWord + ' \\u00b7 ' : '') + 'total ' + fmt(cur.total[0]) + ' \\u00b7 ' +\n"
    "    (st.t0 === null ? D.profiles : cur.pok.reduce(function (a, b, p) { return a + b * PC[p]; }, 0) + ' of ' + D.profiles) +\n"
    "    (D.profiles === 1 ? ' profile, ' : ' profiles, ') + group3(String(cur.count[0])) + ' samples' +\n"
    "    (selText(st.filter) || st.t0 !== null ? ' selected of ' + group3(String(D.samples)) : '');\n"
    "  var sum = $('summary');\n"
    "  sum.textContent = info;\n"
    "  sum.dataset.total = cur.total[0]; sum.dataset.samples = cur.count[0];\n"
    "  renderTimeline(); renderLabels(); renderBreakdown(); renderTop(); renderSandwich();\n"
    "  if (search.value) runSearch();\n"
    "  focus = 0;\n"
    "  layout(); draw();\n"
    "  document.body.dataset.ready = '1';\n"
    "}\n"
    "\n"
    "var notes = [];\n"
    "if (D.truncated) notes.push(D.truncated + (D.truncated === 1 ? ' stack was' : ' stacks were') +\n"
    "  ' cut at the maximum depth ([truncated])');\n"
    "if (D.folded) notes.push(D.folded + ' frames of ' + fmt(D.foldedBelow) +\n"
    "  ' or less are folded into their callers\\' self time');\n"
    "if (D.invalid) notes.push(D.invalid + ' names were not valid UTF-8 (shown with U+FFFD)');\n"
    "$('note').textContent = notes.join('; ');\n"
    "\n"
    "canvas.addEventListener('mousemove', function (ev) {\n"
    "  var n = hit(ev);\n"
    "  if (n === null) tip.style.display = 'none'; else showTip(ev, n);\n"
    "});\n"
    "canvas.addEventListener('mouseleave', function () { tip.style.display = 'none'; });\n"
    "canvas.addEventListener('click', function (ev) {\n"
    "  var n = hit(ev);\n"
    "  if (n === null || n < 0) return;\n"
    "  if (ev.shiftKey && n > 0) { st.fn = fnOf[n]; writeHash(); renderSandwich(); } else zoom(n);\n"
    "});\n"
    "$('reset').addEventListener('click', function () { zoom(0); });\n"
    "$('filter').addEventListener('change', function () { st.filter = parseSel($('filter').value); update(); });\n"
    "$('clear').addEventListener('click', function () { st.filter = {}; update(); });\n"
    "$('group').addEventListener('change', function () { st.group = $('group').value; update(); });\n"
    "$('mode').addEventListener('click', function () {\n"
    "  st.mode = st.mode === 'diff' ? 'flame' : 'diff';\n"
    "  if (st.mode === 'diff' && !st.a && !st.b) diffStart();\n"
    "  update();\n"
    "});\n"
    "/* Diff opens on the current selection as A. B: the next value of the\n"
    " * breakdown when A is one of its values (or the first two values when\n"
    " * nothing is selected), else everything. */\n"
    "function diffStart() {\n"
    "  var f = st.filter, ks = Object.keys(f), g = st.group;\n"
    "  /* The key to contrast: the breakdown's, or the one key filtered on. */\n"
    "  var k = f[g] ? g : ks.length === 1 ? ks[0] : ks.length ? '' : g;\n"
    "  st.a = selText(f); st.b = '';\n"
    "  if (!k || (f[k] && f[k].length !== 1)) return;\n"
    "  var one = f[k] ? f[k][0] : null, rest = {};\n"
    "  for (var o in f) if (o !== k) rest[o] = f[o];\n"
    "  var other = amounts(k, lsMatch(rest), profMask()).names.filter(function (v) { return v !== one; });\n"
    "  if (one === null && other.length >= 2) {\n"
    "    rest[k] = [other[0]]; st.a = selText(rest); rest[k] = [other[1]]; st.b = selText(rest);\n"
    "  } else if (one !== null && other.length) {\n"
    "    rest[k] = [other[0]]; st.b = selText(rest);\n"
    "  }\n"
    "}\n"
    "$('a').addEventListener('change', function () { st.a = $('a').value; update(); });\n"
    "$('b').addEventListener('change', function () { st.b = $('b').value; update(); });\n"
    "$('top').addEventListener('click', function (ev) {\n"
    "  var th = ev.target.closest('th'), tr = ev.target.closest('tbody tr');\n"
    "  if (th && th.dataset.sort) { st.sort = th.dataset.sort; renderTop(); }\n"
    "  else if (tr) { st.fn = +tr.dataset.fn; writeHash(); renderSandwich(); $('sandwich').scrollIntoView(); }\n"
    "});\n"
    "$('swclose').addEventListener('click', function () { st.fn = -1; writeHash(); renderSandwich(); });\n"
    "search.addEventListener('input', runSearch);\n"
    "document.addEventListener('keydown', function (ev) {\n"
    "  if (ev.key === 'Escape') {\n"
    "    if (document.activeElement === search && search.value) { search.value = ''; runSearch(); }\n"
    "    else zoom(0);\n"
    "  } else if (ev.key === '/' && document.activeElement.tagName !== 'INPUT') {\n"
    "    ev.preventDefault(); search.focus();\n"
    "  }\n"
    "});\n"
    "view.addEventListener('scroll', redraw);\n"
    "window.addEventListener('resize', function () {\n"
    "  if (view.clientWidth !== W) layout(); else fit();\n"
    "  redraw(); renderTimeline();\n"
    "});\n"
    "window.addEventListener('hashchange', function () { readHash(); update(); });\n"
    "readHash();\n"
    "update();\n"
    "})();\n"
    "</script>\n"
    "</body>\n"
    "</html>\n";

/* ------------------------------------------------------------- writing */

static int cmp_i64_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

/* Every node's total over all samples (the report may hold a selection;
 * the page gets everything). *out is malloc'ed. */
static int totals_of_all(const pn_report *r, int64_t **out, pn_error *e)
{
    int64_t *t = calloc(r->nnodes, sizeof *t);
    if (!t)
        return pn_fail(e, PN_ENOMEM, "flame graph: cannot sum %u nodes", r->nnodes);
    for (uint32_t i = 0; i < r->nrecs; i++)
        t[r->recs[i].node] += r->recs[i].value;
    for (uint32_t i = r->nnodes; i-- > 1;)
        t[r->nodes[i].parent] += t[i];
    *out = t;
    return 0;
}

/* The smallest total a node needs to be shown so at most max_nodes are
 * (never below 1: empty nodes add nothing). Children never outweigh their
 * parent, so the kept nodes always form a tree. */
static int cutoff_for(const pn_report *r, const int64_t *all, uint32_t max_nodes,
                      int64_t *cutoff, uint64_t *folded, pn_error *e)
{
    uint32_t nonzero = 0;
    for (uint32_t i = 1; i < r->nnodes; i++)
        nonzero += all[i] > 0;
    *cutoff = 1;
    *folded = 0;
    if (max_nodes < 2)
        max_nodes = 2;
    /* The root is always written, so max_nodes - 1 are left for the rest. */
    uint32_t room = max_nodes - 1;
    if (nonzero <= room)
        return 0;
    int64_t *t = malloc((size_t)nonzero * sizeof *t);
    if (!t)
        return pn_fail(e, PN_ENOMEM, "flame graph: cannot sort %u node totals", nonzero);
    uint32_t k = 0;
    for (uint32_t i = 1; i < r->nnodes; i++)
        if (all[i] > 0)
            t[k++] = all[i];
    qsort(t, k, sizeof *t, cmp_i64_desc);
    /* Strictly above the first total that does not fit: ties with it are
     * folded together rather than kept arbitrarily. */
    *cutoff = t[room] + 1;
    uint32_t kept = 0;
    while (kept < k && t[kept] >= *cutoff)
        kept++;
    *folded = nonzero - kept;
    free(t);
    return 0;
}

/* Comma-separated numbers with a line break now and then, which keeps
 * editors and diff tools happy. */
static void put_num(FILE *f, uint64_t *count, int64_t v)
{
    fprintf(f, "%s%" PRId64, *count == 0 ? "" : *count % 32 == 0 ? ",\n" : ",", v);
    (*count)++;
}

/* String id s in the page's table, given a number when first used. */
static uint32_t page_str(FILE *f, uint32_t *out_id, uint32_t *next, uint32_t s,
                         const char *text)
{
    if (out_id[s] == PN_REPORT_NONE) {
        out_id[s] = (*next)++;
        if (out_id[s] > 0)
            putc(',', f);
        json_string(f, text);
    }
    return out_id[s];
}

/* The data block: a JSON object (written by json_string and integers only)
 * of flat integer arrays the page reads by index:
 *   names  strings, referred to by index from the arrays below
 *   funcs  (display name, file, line) per function, function 0 the root
 *   nodes  (function, depth, line) per shown node, depth-first
 *   loff, lab  label set i is the (key, value) pairs lab[loff[i]..loff[i+1])
 *   recs   (node, label set, value, samples, bucket) per stack, label set
 *          and time bucket (timeline.c)
 *   profs  (start, duration) of each bucket in ms, for the timeline
 *   pcount profiles per bucket */
static int write_data(FILE *f, const pn_report *r, const char *view, const uint32_t *order,
                      const int64_t *all, int64_t cutoff, uint64_t folded, pn_error *e)
{
    char **disp = NULL;
    uint32_t *out_id = malloc((size_t)r->nnames * sizeof *out_id);
    uint32_t *func_name = malloc((size_t)r->nfuncs * sizeof *func_name);
    uint32_t *page_node = malloc((size_t)r->nnodes * sizeof *page_node);
    uint32_t *file_id = malloc((size_t)r->nnames * sizeof *file_id);
    int rc = -1;
    if (!out_id || !func_name || !page_node || !file_id) {
        pn_fail(e, PN_ENOMEM, "flame graph: cannot renumber %u names", r->nnames);
        goto done;
    }
    if (pn_report_display_names(r, &disp, e) != 0)
        goto done;
    memset(out_id, 0xff, (size_t)r->nnames * sizeof *out_id);
    memset(file_id, 0xff, (size_t)r->nnames * sizeof *file_id);

    fputs("{\"type\":", f);
    json_string(f, r->sample_type ? r->sample_type : "");
    fputs(",\"unit\":", f);
    json_string(f, r->sample_unit ? r->sample_unit : "");
    fputs(",\"view\":", f);
    json_string(f, view ? view : "");
    fprintf(f,
            ",\"profiles\":%zu,\"samples\":%" PRIu64 ",\"truncated\":%" PRIu64
            ",\"folded\":%" PRIu64 ",\"foldedBelow\":%" PRId64 ",\"invalid\":%" PRIu64
            ",\n\"names\":[",
            r->profiles, r->samples, r->truncated_stacks, folded, folded ? cutoff - 1 : 0,
            r->invalid_utf8);
    /* Display names are not interned strings, so they get ids of their own
     * after the interned ones: written as needed, numbered in order. */
    uint32_t next = 0;
    page_str(f, out_id, &next, 0, "");
    for (uint32_t i = 0; i < r->nfuncs; i++) {
        func_name[i] = next++;
        putc(',', f);
        json_string(f, disp[i]);
        /* Files as shown (relative), apart from label values. */
        page_str(f, file_id, &next, r->funcs[i].file,
                 pn_report_shown_file(r, r->names[r->funcs[i].file]));
    }
    for (size_t i = 0; i < r->nlab; i++)
        page_str(f, out_id, &next, r->lab[i], r->names[r->lab[i]]);
    fputs("],\n\"funcs\":[", f);
    uint64_t count = 0;
    for (uint32_t i = 0; i < r->nfuncs; i++) {
        put_num(f, &count, func_name[i]);
        put_num(f, &count, file_id[r->funcs[i].file]);
        put_num(f, &count, r->funcs[i].line);
    }
    fputs("],\n\"nodes\":[", f);
    count = 0;
    uint32_t shown = 0;
    for (uint32_t k = 0; k < r->nnodes; k++) {
        uint32_t id = order[k];
        const pn_report_node *n = &r->nodes[id];
        if (id != PN_REPORT_ROOT && all[id] < cutoff) {
            page_node[id] = PN_REPORT_NONE;
            continue;
        }
        page_node[id] = shown++;
        put_num(f, &count, n->func);
        put_num(f, &count, n->depth);
        put_num(f, &count, n->line);
    }
    /* A folded node's samples go to its nearest shown ancestor (parents
     * have smaller indices, so theirs is known first). */
    for (uint32_t id = 1; id < r->nnodes; id++)
        if (page_node[id] == PN_REPORT_NONE)
            page_node[id] = page_node[r->nodes[id].parent];
    fputs("],\n\"loff\":[", f);
    count = 0;
    for (uint32_t i = 0; i <= r->nlsets; i++)
        put_num(f, &count, r->lset_off[i]);
    fputs("],\n\"lab\":[", f);
    count = 0;
    for (size_t i = 0; i < r->nlab; i++)
        put_num(f, &count, out_id[r->lab[i]]);
    pn_page_timeline tl;
    if (pn_report_timeline(r, page_node, r->max_page_recs, &tl, e) != 0)
        goto done;
    fputs("],\n\"recs\":[", f);
    count = 0;
    for (size_t i = 0; i < tl.nrecs; i++) {
        const pn_page_rec *rec = &tl.recs[i];
        put_num(f, &count, rec->node);
        put_num(f, &count, rec->lset);
        put_num(f, &count, rec->value);
        put_num(f, &count, rec->count);
        put_num(f, &count, rec->bucket);
    }
    /* ms: exact in a JS number */
    fputs("],\n\"profs\":[", f);
    count = 0;
    for (size_t i = 0; i < tl.nbuckets; i++) {
        put_num(f, &count, tl.buckets[i].start / 1000000);
        put_num(f, &count, (tl.buckets[i].end - tl.buckets[i].start) / 1000000);
    }
    fputs("],\n\"pcount\":[", f);
    count = 0;
    for (size_t i = 0; i < tl.nbuckets; i++)
        put_num(f, &count, tl.buckets[i].profiles);
    pn_report_timeline_free(&tl);
    fputs("]}", f);
    rc = 0;
done:
    pn_report_display_free(r, disp);
    free(out_id);
    free(func_name);
    free(page_node);
    free(file_id);
    return rc;
}

/* Like mkstemp, but the mode goes through the umask as for any new file
 * (0644 as the folder exporter's profiles), not a fixed 0600 or 0644. */
static int open_temp(const char *out_path, char **tmp, pn_error *e)
{
    size_t tlen = strlen(out_path) + 40;
    if (!(*tmp = malloc(tlen)))
        return pn_fail(e, PN_ENOMEM, "flame graph: cannot allocate a temporary name");
    for (unsigned i = 0; i < 100; i++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        snprintf(*tmp, tlen, "%s.tmp.%ld.%lx.%u", out_path, (long)getpid(),
                 (unsigned long)ts.tv_nsec, i);
        int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST) {
            if (fd < 0)
                pn_fail(e, PN_EIO, "cannot create flame graph '%s': %s", out_path,
                        strerror(errno));
            return fd;
        }
    }
    return pn_fail(e, PN_EIO, "cannot create flame graph '%s': no free temporary name",
                   out_path);
}

int pn_report_write_html_max(const pn_report *r, const char *title, const char *view,
                             const char *out_path, uint32_t max_nodes, pn_error *e)
{
    if (!r || !out_path || !*out_path)
        return pn_fail(e, PN_EINVAL,
                       "pn_report_write_html: a report and an output path are required");
    if (!title)
        title = "Flame graph";

    uint32_t *order = NULL;
    int64_t *all = NULL, cutoff;
    uint64_t folded;
    char *tmp = NULL;
    if (pn_report_preorder(r, &order, e) != 0 || totals_of_all(r, &all, e) != 0 ||
        cutoff_for(r, all, max_nodes, &cutoff, &folded, e) != 0) {
        free(order);
        free(all);
        return -1;
    }
    if (folded)
        pn_log(PN_LOG_INFO, "flame graph %s: %" PRIu64 " frames with totals of %" PRId64
               " or less folded into their callers", out_path, folded, cutoff - 1);

    /* Written next to the target and renamed over it, so a reader never
     * sees half a page and a failure leaves any older page intact. */
    int fd = open_temp(out_path, &tmp, e);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (!f) {
        if (fd >= 0) {
            pn_fail(e, PN_EIO, "cannot write flame graph '%s': %s", out_path,
                    strerror(errno));
            close(fd);
            unlink(tmp);
        }
        free(order);
        free(all);
        free(tmp);
        return -1;
    }
    fputs(PAGE_HEAD, f);
    html_text(f, title);
    fputs(PAGE_STYLE, f);
    html_text(f, title);
    fputs(PAGE_BODY, f);
    int rc = write_data(f, r, view, order, all, cutoff, folded, e);
    fputs(PAGE_SCRIPT, f);
    free(order);
    free(all);
    int err = 0;
    errno = 0;
    if (rc == 0 && (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0))
        err = errno ? errno : EIO;
    if (fclose(f) != 0 && rc == 0 && !err)
        err = errno ? errno : EIO;
    if (rc == 0 && err)
        rc = pn_fail(e, PN_EIO, "cannot write flame graph '%s': %s", out_path,
                     strerror(err));
    if (rc == 0 && rename(tmp, out_path) != 0)
        rc = pn_fail(e, PN_EIO, "cannot move the flame graph into place at '%s': %s",
                     out_path, strerror(errno));
    if (rc != 0)
        unlink(tmp);
    free(tmp);
    return rc;
}

int pn_report_write_html_view(const pn_report *r, const char *title, const char *view,
                              const char *out_path, pn_error *e)
{
    return pn_report_write_html_max(r, title, view, out_path, PN_HTML_MAX_NODES, e);
}

int pn_report_write_html(const pn_report *r, const char *title, const char *out_path,
                         pn_error *e)
{
    return pn_report_write_html_max(r, title, NULL, out_path, PN_HTML_MAX_NODES, e);
}
