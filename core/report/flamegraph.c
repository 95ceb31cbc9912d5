/* The flame graph: one self-contained HTML page (inline CSS and JS, no
 * network) that draws the merged call tree as an icicle, root at the top.
 * The tree travels as JSON inside a <script type="application/json"> block:
 * a flat pre-order list of (name, depth, total) triples, so neither the
 * writer nor the page recurses however deep the stacks are. */
#include <errno.h>
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

/* Length of the well-formed UTF-8 sequence at s (n > 0 bytes left) with its
 * code point in *cp, or 0 when s does not start one. */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2, v = c & 0x1fu, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, v = c & 0x0fu, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, v = c & 0x07u, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3fu);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

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
        size_t k = utf8_seq(p, n, &cp);
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
        size_t k = utf8_seq(p, n, &cp);
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
    "html,body{margin:0;height:100%}\n"
    "body{display:flex;flex-direction:column;color:#222;background:#fff;"
    "font:13px/1.4 system-ui,-apple-system,'Segoe UI',Roboto,Arial,sans-serif}\n"
    "header{display:flex;flex-wrap:wrap;align-items:center;gap:6px 16px;"
    "padding:8px 12px;border-bottom:1px solid #ddd}\n"
    "h1{margin:0;font-size:16px;font-weight:600;overflow-wrap:anywhere}\n"
    "#summary{color:#555}\n"
    "#note{color:#8a5a00}\n"
    "#controls{margin-left:auto;display:flex;align-items:center;gap:8px}\n"
    "#search{width:240px;padding:3px 6px;font:inherit}\n"
    "#match{color:#8e24aa;white-space:nowrap}\n"
    "button{font:inherit;padding:2px 10px;cursor:pointer}\n"
    "#view{flex:1;position:relative;overflow-x:hidden;overflow-y:scroll}\n"
    "#fg{position:sticky;top:0;display:block;cursor:pointer}\n"
    "#tip{position:fixed;z-index:2;display:none;pointer-events:none;max-width:560px;"
    "padding:6px 8px;background:#fffffa;border:1px solid #999;border-radius:3px;"
    "box-shadow:0 2px 8px rgba(0,0,0,.25);overflow-wrap:anywhere}\n"
    "#tip b{display:block;margin-bottom:3px;font-weight:600;"
    "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}\n"
    "</style>\n"
    "</head>\n"
    "<body>\n"
    "<header>\n"
    "<h1>";

static const char PAGE_BODY[] =
    "</h1>\n"
    "<span id=\"summary\"></span>\n"
    "<span id=\"note\"></span>\n"
    "<div id=\"controls\">\n"
    "<input id=\"search\" type=\"search\" placeholder=\"Search functions\" "
    "aria-label=\"Search functions\" autocomplete=\"off\">\n"
    "<span id=\"match\"></span>\n"
    "<button id=\"reset\" type=\"button\">Reset zoom</button>\n"
    "</div>\n"
    "</header>\n"
    "<div id=\"view\"><canvas id=\"fg\"></canvas><div id=\"spacer\"></div></div>\n"
    "<div id=\"tip\"></div>\n"
    "<noscript><p>This flame graph needs JavaScript.</p></noscript>\n"
    "<script id=\"pn-data\" type=\"application/json\">";

/* The viewer. Layout happens once per zoom or resize: a breadth-first walk
 * of the zoomed subtree that skips frames narrower than a pixel, merging runs
 * of such siblings into one grey block, so the cost follows what is visible
 * rather than the node count. Drawing covers only the rows scrolled into
 * view; the canvas is sticky and a spacer gives the scroll height, so depth
 * never runs into canvas size limits. */
static const char PAGE_SCRIPT[] =
    "</script>\n"
    "<script>\n"
    "(function () {\n"
    "'use strict';\n"
    "var D = JSON.parse(document.getElementById('pn-data').textContent);\n"
    "var names = D.names, raw = D.nodes, N = raw.length / 3;\n"
    "var nameOf = new Int32Array(N), depth = new Int32Array(N);\n"
    "var parent = new Int32Array(N), end = new Int32Array(N);\n"
    "var total = new Float64Array(N), self = new Float64Array(N);\n"
    "var x0 = new Float64Array(N);\n"
    "var i, stack = [];\n"
    "for (i = 0; i < N; i++) {\n"
    "  nameOf[i] = raw[3 * i]; depth[i] = raw[3 * i + 1];\n"
    "  total[i] = self[i] = raw[3 * i + 2];\n"
    "  while (stack.length && depth[stack[stack.length - 1]] >= depth[i]) end[stack.pop()] = i;\n"
    "  parent[i] = stack.length ? stack[stack.length - 1] : -1;\n"
    "  if (parent[i] >= 0) self[parent[i]] -= total[i];\n"
    "  stack.push(i);\n"
    "}\n"
    "while (stack.length) end[stack.pop()] = N;\n"
    "var ALL = N ? total[0] : 0;\n"
    "\n"
    "var view = document.getElementById('view'), canvas = document.getElementById('fg');\n"
    "var spacer = document.getElementById('spacer'), tip = document.getElementById('tip');\n"
    "var search = document.getElementById('search'), matchEl = document.getElementById('match');\n"
    "var ctx = canvas.getContext('2d');\n"
    "var ROW = 18, MINW = 1;\n"
    "var FONT = '12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace';\n"
    "var focus = 0, rows = [], groups = [], W = 0, charW = 7;\n"
    "var matchName = null, pending = false;\n"
    "\n"
    "function group3(s) {\n"
    "  var out = '';\n"
    "  while (s.length > 3) { out = ',' + s.slice(-3) + out; s = s.slice(0, -3); }\n"
    "  return s + out;\n"
    "}\n"
    "function fmt(v) {\n"
    "  var u = D.unit;\n"
    "  if (u === 'nanoseconds') {\n"
    "    if (v >= 1e9) return (v / 1e9).toFixed(2) + ' s';\n"
    "    if (v >= 1e6) return (v / 1e6).toFixed(2) + ' ms';\n"
    "    if (v >= 1e3) return (v / 1e3).toFixed(2) + ' \\u00b5s';\n"
    "    return v + ' ns';\n"
    "  }\n"
    "  if (u === 'bytes') {\n"
    "    var k = 0, units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];\n"
    "    while (v >= 1024 && k < 4) { v /= 1024; k++; }\n"
    "    return (k ? v.toFixed(2) : v) + ' ' + units[k];\n"
    "  }\n"
    "  return group3(String(Math.round(v))) + (u && u !== 'count' ? ' ' + u : '');\n"
    "}\n"
    "function pct(v, of) { return of > 0 ? (100 * v / of).toFixed(2) + '%' : '0%'; }\n"
    "\n"
    "var colors = [];\n"
    "function color(n) {\n"
    "  var c = colors[n];\n"
    "  if (c) return c;\n"
    "  var s = names[n], h = 2166136261;\n"
    "  for (var k = 0; k < s.length; k++) { h ^= s.charCodeAt(k); h = Math.imul(h, 16777619); }\n"
    "  h >>>= 0;\n"
    "  c = 'hsl(' + (6 + h % 44) + ',' + (65 + (h >>> 8) % 25) + '%,' + (52 + (h >>> 16) % 14) + '%)';\n"
    "  return (colors[n] = c);\n"
    "}\n"
    "function matched(n) { return matchName !== null && n > 0 && matchName[nameOf[n]] === 1; }\n"
    "\n"
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
    "}\n"
    "\n"
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
    "    var R = rows[d], y = d * ROW - top;\n"
    "    if (!R) continue;\n"
    "    for (var k = 0; k < R.length; k += 3) {\n"
    "      var x = R[k], w = R[k + 1], n = R[k + 2];\n"
    "      var fw = w > 2 ? w - 1 : w;\n"
    "      if (n < 0) {\n"
    "        ctx.globalAlpha = 1; ctx.fillStyle = '#d0d0d0';\n"
    "        ctx.fillRect(x, y, fw, ROW - 1);\n"
    "        continue;\n"
    "      }\n"
    "      ctx.globalAlpha = depth[n] < depth[focus] ? 0.55 : 1;\n"
    "      ctx.fillStyle = matched(n) ? '#c040e8' : color(nameOf[n]);\n"
    "      ctx.fillRect(x, y, fw, ROW - 1);\n"
    "      var room = Math.floor((w - 6) / charW);\n"
    "      if (room < 3) continue;\n"
    "      var label = names[nameOf[n]];\n"
    "      if (label.length > room) label = label.slice(0, room - 1) + '\\u2026';\n"
    "      ctx.fillStyle = '#111';\n"
    "      ctx.fillText(label, x + 3, y + ROW / 2);\n"
    "    }\n"
    "  }\n"
    "  ctx.globalAlpha = 1;\n"
    "}\n"
    "function redraw() { if (!pending) { pending = true; window.requestAnimationFrame(draw); } }\n"
    "function relayout() { layout(); draw(); }\n"
    "\n"
    "function hit(ev) {\n"
    "  var b = canvas.getBoundingClientRect();\n"
    "  var mx = ev.clientX - b.left, d = Math.floor((ev.clientY - b.top + view.scrollTop) / ROW);\n"
    "  var R = rows[d];\n"
    "  if (!R) return null;\n"
    "  for (var k = 0; k < R.length; k += 3)\n"
    "    if (mx >= R[k] && mx < R[k] + R[k + 1]) return R[k + 2];\n"
    "  return null;\n"
    "}\n"
    "function tipLine(text, bold) {\n"
    "  var el = document.createElement(bold ? 'b' : 'div');\n"
    "  el.textContent = text;\n"
    "  tip.appendChild(el);\n"
    "}\n"
    "function showTip(ev, n) {\n"
    "  tip.textContent = '';\n"
    "  if (n < 0) {\n"
    "    var g = groups[-1 - n];\n"
    "    tipLine(g[0] + ' frames narrower than a pixel', true);\n"
    "    tipLine('total: ' + fmt(g[1]) + ' (' + pct(g[1], ALL) + ')');\n"
    "    tipLine('each too narrow to draw at this zoom');\n"
    "  } else {\n"
    "    tipLine(names[nameOf[n]], true);\n"
    "    tipLine('total: ' + fmt(total[n]) + ' (' + pct(total[n], ALL) + ' of all)');\n"
    "    tipLine('self: ' + fmt(self[n]) + ' (' + pct(self[n], ALL) + ' of all)');\n"
    "    if (focus !== 0 && depth[n] > depth[focus])\n"
    "      tipLine(pct(total[n], total[focus]) + ' of the zoomed frame');\n"
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
    "\n"
    "function runSearch() {\n"
    "  var term = search.value.trim().toLowerCase();\n"
    "  if (!term) { matchName = null; matchEl.textContent = ''; redraw(); return; }\n"
    "  matchName = new Uint8Array(names.length);\n"
    "  for (var k = 0; k < names.length; k++)\n"
    "    if (names[k].toLowerCase().indexOf(term) >= 0) matchName[k] = 1;\n"
    "  var sum = 0, frames = 0, j;\n"
    "  for (j = 1; j < N; j++) if (matched(j)) frames++;\n"
    "  /* A matched frame's subtree is counted once, whatever matches inside. */\n"
    "  for (j = 1; j < N;) {\n"
    "    if (matched(j)) { sum += total[j]; j = end[j]; } else j++;\n"
    "  }\n"
    "  matchEl.textContent = frames ? 'Matched ' + frames + ' frames: ' + fmt(sum) + ' (' + pct(sum, ALL) + ')'\n"
    "                               : 'No match';\n"
    "  redraw();\n"
    "}\n"
    "\n"
    "var info = (D.type ? D.type + ' \\u00b7 ' : '') + 'total ' + fmt(ALL) + ' \\u00b7 ' + D.profiles +\n"
    "  (D.profiles === 1 ? ' profile, ' : ' profiles, ') + group3(String(D.samples)) + ' samples';\n"
    "document.getElementById('summary').textContent = ALL > 0 ? info : 'No samples \\u00b7 ' + info;\n"
    "var notes = [];\n"
    "if (D.truncated) notes.push(D.truncated + (D.truncated === 1 ? ' stack was' : ' stacks were') +\n"
    "  ' cut at the maximum depth ([truncated])');\n"
    "if (D.folded) notes.push(D.folded + ' frames of ' + fmt(D.foldedBelow) +\n"
    "  ' or less are folded into their callers\\' self time');\n"
    "document.getElementById('note').textContent = notes.join('; ');\n"
    "\n"
    "canvas.addEventListener('mousemove', function (ev) {\n"
    "  var n = hit(ev);\n"
    "  if (n === null) tip.style.display = 'none'; else showTip(ev, n);\n"
    "});\n"
    "canvas.addEventListener('mouseleave', function () { tip.style.display = 'none'; });\n"
    "canvas.addEventListener('click', function (ev) {\n"
    "  var n = hit(ev);\n"
    "  if (n !== null && n >= 0) zoom(n);\n"
    "});\n"
    "document.getElementById('reset').addEventListener('click', function () { zoom(0); });\n"
    "search.addEventListener('input', runSearch);\n"
    "document.addEventListener('keydown', function (ev) {\n"
    "  if (ev.key === 'Escape') {\n"
    "    if (document.activeElement === search && search.value) { search.value = ''; runSearch(); }\n"
    "    else zoom(0);\n"
    "  } else if (ev.key === '/' && document.activeElement !== search) {\n"
    "    ev.preventDefault(); search.focus();\n"
    "  }\n"
    "});\n"
    "view.addEventListener('scroll', redraw);\n"
    "window.addEventListener('resize', function () { if (view.clientWidth !== W) layout(); redraw(); });\n"
    "relayout();\n"
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

/* The smallest total a node needs to be shown so at most max_nodes are
 * (never below 1: empty nodes add nothing). Children never outweigh their
 * parent, so the kept nodes always form a tree. */
static int cutoff_for(const pn_report *r, uint32_t max_nodes, int64_t *cutoff,
                      uint64_t *folded, pn_error *e)
{
    uint32_t nonzero = 0;
    for (uint32_t i = 1; i < r->nnodes; i++)
        nonzero += r->nodes[i].total > 0;
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
        if (r->nodes[i].total > 0)
            t[k++] = r->nodes[i].total;
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

static int write_page(FILE *f, const pn_report *r, const char *title,
                      const uint32_t *order, int64_t cutoff, uint64_t folded,
                      pn_error *e)
{
    /* Names are renumbered densely in order of first use, so the page holds
     * only the names of frames it shows. */
    uint32_t *out_id = malloc((size_t)r->nnames * sizeof *out_id);
    if (!out_id)
        return pn_fail(e, PN_ENOMEM, "flame graph: cannot renumber %u names", r->nnames);
    memset(out_id, 0xff, (size_t)r->nnames * sizeof *out_id);

    fputs(PAGE_HEAD, f);
    html_text(f, title);
    fputs(PAGE_STYLE, f);
    html_text(f, title);
    fputs(PAGE_BODY, f);

    fputs("{\"type\":", f);
    json_string(f, r->sample_type ? r->sample_type : "");
    fputs(",\"unit\":", f);
    json_string(f, r->sample_unit ? r->sample_unit : "");
    fprintf(f,
            ",\"profiles\":%zu,\"samples\":%" PRIu64 ",\"truncated\":%" PRIu64
            ",\"folded\":%" PRIu64 ",\"foldedBelow\":%" PRId64 ",\n\"names\":[",
            r->profiles, r->samples, r->truncated_stacks, folded,
            folded ? cutoff - 1 : 0);
    uint32_t next = 0;
    for (uint32_t k = 0; k < r->nnodes; k++) {
        const pn_report_node *n = &r->nodes[order[k]];
        if (order[k] != PN_REPORT_ROOT && n->total < cutoff)
            continue;
        if (out_id[n->name] != PN_REPORT_NONE)
            continue;
        out_id[n->name] = next;
        if (next++ > 0)
            putc(',', f);
        json_string(f, order[k] == PN_REPORT_ROOT ? ROOT_LABEL : r->names[n->name]);
    }
    fputs("],\n\"nodes\":[", f);
    uint32_t written = 0;
    for (uint32_t k = 0; k < r->nnodes; k++) {
        const pn_report_node *n = &r->nodes[order[k]];
        if (order[k] != PN_REPORT_ROOT && n->total < cutoff)
            continue;
        /* A line break now and then keeps editors and diff tools happy. */
        fprintf(f, "%s%" PRIu32 ",%" PRIu32 ",%" PRId64, written == 0 ? ""
                : written % 16 == 0 ? ",\n" : ",",
                out_id[n->name], n->depth, n->total);
        written++;
    }
    fputs("]}", f);
    fputs(PAGE_SCRIPT, f);
    free(out_id);
    return 0;
}

int pn_report_write_html_max(const pn_report *r, const char *title,
                             const char *out_path, uint32_t max_nodes, pn_error *e)
{
    if (!r || !out_path || !*out_path)
        return pn_fail(e, PN_EINVAL,
                       "pn_report_write_html: a report and an output path are required");
    if (!title)
        title = "Flame graph";

    /* The root name ("" in the tree) is shown as ROOT_LABEL, but a function
     * may also be called that; renumbering keys on the tree's name ids, so
     * the two stay apart. */
    uint32_t *order = NULL;
    int64_t cutoff;
    uint64_t folded;
    if (pn_report_preorder(r, &order, e) != 0)
        return -1;
    if (cutoff_for(r, max_nodes, &cutoff, &folded, e) != 0) {
        free(order);
        return -1;
    }
    if (folded)
        pn_log(PN_LOG_INFO, "flame graph %s: %" PRIu64 " frames with totals of %" PRId64
               " or less folded into their callers", out_path, folded, cutoff - 1);

    /* Written next to the target and renamed over it, so a reader never
     * sees half a page and a failure leaves any older page intact. */
    size_t tlen = strlen(out_path) + sizeof ".tmp.XXXXXX";
    char *tmp = malloc(tlen);
    if (!tmp) {
        free(order);
        return pn_fail(e, PN_ENOMEM, "flame graph: cannot allocate a temporary name");
    }
    snprintf(tmp, tlen, "%s.tmp.XXXXXX", out_path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int err = errno;
        free(order);
        free(tmp);
        return pn_fail(e, PN_EIO, "cannot create flame graph '%s': %s", out_path,
                       strerror(err));
    }
    /* mkstemp makes the file private; a report is meant to be shared. */
    if (fchmod(fd, 0644) != 0)
        pn_log(PN_LOG_DEBUG, "flame graph %s: fchmod: %s", out_path, strerror(errno));
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int err = errno;
        close(fd);
        unlink(tmp);
        free(order);
        free(tmp);
        return pn_fail(e, PN_EIO, "cannot write flame graph '%s': %s", out_path,
                       strerror(err));
    }
    int rc = write_page(f, r, title, order, cutoff, folded, e);
    free(order);
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

int pn_report_write_html(const pn_report *r, const char *title, const char *out_path,
                         pn_error *e)
{
    return pn_report_write_html_max(r, title, out_path, PN_HTML_MAX_NODES, e);
}
