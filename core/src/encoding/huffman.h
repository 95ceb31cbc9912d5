/* Huffman codes as DEFLATE (RFC 1951) uses them: code lengths limited to
 * a maximum, and the canonical codes those lengths define. deflate.c
 * builds a fresh pair of codes for every block it writes. */
#ifndef PN_HUFFMAN_H
#define PN_HUFFMAN_H

#include <stdint.h>

#define PN_HUFFMAN_MAX_SYMS 288 /* deflate's largest alphabet */
#define PN_HUFFMAN_MAX_BITS 15

/* Code lengths for the symbols 0..n-1 (2 <= n <= PN_HUFFMAN_MAX_SYMS, each
 * frequency below 2^23) minimising sum(freq * len), no length above limit
 * (<= PN_HUFFMAN_MAX_BITS). Unused symbols get 0, except that at least two
 * symbols always get a length: a one-symbol code is incomplete, which not
 * every decoder accepts. The lengths always fill the code space exactly. */
void pn_huffman_lengths(const uint32_t *freq, unsigned n, unsigned limit, uint8_t *len);

/* The canonical codes for those lengths (RFC 1951 3.2.2), bit-reversed as
 * deflate sends them LSB first; code[s] is left alone where len[s] == 0. */
void pn_huffman_codes(const uint8_t *len, unsigned n, uint16_t *code);

#endif
