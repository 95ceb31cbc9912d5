/* Page-backed tables: zeroed, resident only where written, cleared back to
 * zero and to no resident pages, a guard page right after the table. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "support/pages.h"

/* Permissions ("rw-p", "---p") of the mapping holding addr, from
 * /proc/self/maps; 0 when no mapping holds it. */
static int perms_at(uintptr_t addr, char perms[5])
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return 0;
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char p[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, p) == 3 && addr >= lo && addr < hi) {
            memcpy(perms, p, 5);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

static void test_zeroed_and_lazy(void)
{
    size_t bytes = 8u << 20;
    unsigned char *p = pn_pages_new(bytes);
    CHECK(p != NULL);
    if (!p)
        return;
    CHECK_EQ_INT((uintptr_t)p % 64, 0);
    CHECK_EQ_INT(pn_pages_resident(p, bytes), 0);
    /* Three writes far apart: three pages, whatever the table's size. */
    p[0] = 1;
    p[bytes / 2] = 2;
    p[bytes - 1] = 3;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    CHECK_EQ_INT(pn_pages_resident(p, bytes), 3 * page);
    CHECK_EQ_INT(p[1] + p[bytes / 2 + 1] + p[bytes - 2], 0);

    pn_pages_clear(p, bytes);
    CHECK_EQ_INT(pn_pages_resident(p, bytes), 0);
    CHECK_EQ_INT(p[0] + p[bytes / 2] + p[bytes - 1], 0);
    pn_pages_free(p, bytes);
}

static void test_clear_prefix(void)
{
    size_t bytes = 1u << 20, page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *p = pn_pages_new(bytes);
    CHECK(p != NULL);
    if (!p)
        return;
    memset(p, 0xAB, 10 * page);
    CHECK(pn_pages_resident(p, bytes) >= 10 * page);
    /* Only what was written needs clearing; the rest was zero already. */
    pn_pages_clear(p, 10 * page);
    CHECK_EQ_INT(pn_pages_resident(p, bytes), 0);
    size_t nonzero = 0;
    for (size_t i = 0; i < 11 * page; i++)
        nonzero += p[i] != 0;
    CHECK_EQ_INT(nonzero, 0);
    pn_pages_free(p, bytes);
}

static void test_guard_page(void)
{
    /* Sizes that end mid-page and on a page boundary. */
    size_t sizes[] = {1, 100, 4096, 12345, 1u << 16};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t bytes = sizes[i];
        unsigned char *p = pn_pages_new(bytes);
        CHECK(p != NULL);
        if (!p)
            continue;
        memset(p, 0x5A, bytes); /* the whole table is writable */
        char first[5] = "", last[5] = "", after[5] = "";
        CHECK(perms_at((uintptr_t)p, first) && strcmp(first, "rw-p") == 0);
        CHECK(perms_at((uintptr_t)p + bytes - 1, last) && strcmp(last, "rw-p") == 0);
        /* Running off the end by a cache line lands on the guard. */
        CHECK(perms_at((uintptr_t)p + bytes + 64, after) && strcmp(after, "---p") == 0);
        pn_pages_free(p, bytes);
        CHECK(!perms_at((uintptr_t)p, first)); /* unmapped again */
    }
}

TEST_MAIN(T(test_zeroed_and_lazy), T(test_clear_prefix), T(test_guard_page))
