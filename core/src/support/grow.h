/* Growing arrays: doubling realloc for the encoders' tables. */
#ifndef PN_GROW_H
#define PN_GROW_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* arr grown to hold `need` (at least one) elements of `size` bytes, its
 * capacity in *cap; NULL when that fails, arr then still being valid. */
static inline void *pn_grow_buf(void *arr, size_t *cap, size_t need, size_t size)
{
    if (need < 1)
        need = 1;
    if (arr && need <= *cap)
        return arr;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2 / size)
            return NULL;
        ncap *= 2;
    }
    void *p = realloc(arr, ncap * size);
    if (p)
        *cap = ncap;
    return p;
}

#endif
