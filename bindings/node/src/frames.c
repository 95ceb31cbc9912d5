/* A V8 profile's frames as JS hands them over, interned into a period's
 * symbols (see addon.h). Main thread. */
#include <stdlib.h>
#include <string.h>

#include "addon.h"

int frames_open(napi_env env, frames_ctx *fc, const napi_value *argv)
{
    memset(fc, 0, sizeof *fc);
    fc->names = argv[0];
    fc->files = argv[1];
    size_t nlines, nparent;
    uint32_t nnames, nfiles;
    if (napi_get_array_length(env, argv[0], &nnames) != napi_ok ||
        napi_get_array_length(env, argv[1], &nfiles) != napi_ok || nnames != nfiles) {
        throw_msg(env, "ERR_INVALID_ARG_TYPE", "profile: names/files must be arrays of one length");
        return -1;
    }
    if (!(fc->lines = js_typed(env, argv[2], napi_int32_array, &nlines, "lines")) ||
        !(fc->node_frame = js_typed(env, argv[3], napi_int32_array, &fc->nnodes, "nodeFrame")) ||
        !(fc->node_parent = js_typed(env, argv[4], napi_int32_array, &nparent, "nodeParent")))
        return -1;
    if (nlines != nnames || nparent != fc->nnodes) {
        throw_msg(env, "ERR_INVALID_ARG_VALUE", "profile: array lengths differ");
        return -1;
    }
    fc->nframes = nnames;
    return 0;
}

int frames_cache(napi_env env, frames_ctx *fc, int slot)
{
    fc->fid[slot] = malloc((fc->nframes ? fc->nframes : 1) * sizeof(uint32_t));
    fc->gen[slot] = UINT64_MAX;
    if (!fc->fid[slot]) {
        throw_msg(env, NULL, "pyroscope: out of memory");
        return -1;
    }
    return 0;
}

void frames_close(frames_ctx *fc)
{
    for (int k = 0; k < FRAMES_SLOTS; k++) {
        free(fc->fid[k]);
        fc->fid[k] = NULL;
    }
}

size_t frames_stack(const frames_ctx *fc, int32_t node, int32_t *out, size_t max)
{
    if (max == 0 || max > FRAMES_MAX_STACK)
        max = FRAMES_MAX_STACK;
    size_t depth = 0;
    /* guard: a malformed parent chain (a cycle) ends after nnodes steps */
    for (size_t guard = 0; node >= 0 && (size_t)node < fc->nnodes && depth < max &&
                           guard <= fc->nnodes; guard++) {
        if (fc->node_frame[node] >= 0)
            out[depth++] = fc->node_frame[node];
        node = fc->node_parent[node];
    }
    return depth;
}

pn_frame_id frames_intern(napi_env env, frames_ctx *fc, int slot, pn_symbols *sym, int32_t f)
{
    if (f < 0 || (size_t)f >= fc->nframes || !fc->fid[slot])
        return PN_FRAME_UNKNOWN;
    uint64_t g = pn_symbols_generation(sym);
    if (g != fc->gen[slot]) {
        memset(fc->fid[slot], 0xff, fc->nframes * sizeof(uint32_t));
        fc->gen[slot] = g;
    }
    if (fc->fid[slot][f] != UINT32_MAX)
        return fc->fid[slot][f];
    napi_value nv, fv;
    char name[PN_MAX_STRING], file[PN_MAX_STRING];
    size_t nl = 0, fl = 0;
    napi_get_element(env, fc->names, (uint32_t)f, &nv);
    napi_get_element(env, fc->files, (uint32_t)f, &fv);
    if (napi_get_value_string_utf8(env, nv, name, sizeof name, &nl) != napi_ok)
        nl = 0, name[0] = 0;
    if (napi_get_value_string_utf8(env, fv, file, sizeof file, &fl) != napi_ok)
        fl = 0, file[0] = 0;
    int32_t line = fc->lines[f];
    pn_frame_id id = pn_symbols_frame3(sym, name, nl, file, fl, line > 0 ? (uint32_t)line : 0);
    fc->fid[slot][f] = id;
    return id;
}
