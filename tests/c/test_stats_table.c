/* The counters as data (stats_table.c): every row has a name and a meaning,
 * no two rows a binding puts in one stats() share a name, and each row
 * reads its own field (a struct filled with distinct values). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pyroscope_native.h"

typedef const pn_stat_info *(*row_fn)(size_t);

static size_t rows_of(row_fn row, const char **names, size_t n, size_t max)
{
    const pn_stat_info *r;
    for (size_t i = 0; (r = row(i)); i++) {
        CHECK(r->name && *r->name && r->meaning && *r->meaning);
        for (size_t j = 0; j < n; j++)
            if (strcmp(names[j], r->name) == 0) {
                fprintf(stderr, "  duplicate counter name %s\n", r->name);
                CHECK(0);
            }
        if (n < max)
            names[n++] = r->name;
    }
    return n;
}

/* Ruby's stats() holds the agent's, a driver's and the memory driver's
 * counters in one Hash; Python's the agent's and the memory driver's. */
static void test_names_unique(void)
{
    const char *names[128];
    size_t n = rows_of(pn_stat_row, names, 0, 128);
    n = rows_of(pn_stat_driver_row, names, n, 128);
    n = rows_of(pn_stat_memory_row, names, n, 128);
    CHECK(n > 30 && n < 128);
}

/* Field k holds k + 1: row i must read the field its name says. */
#define FILL(st)                                                              \
    do {                                                                      \
        uint64_t *f = (uint64_t *)((char *)&(st) + first);                    \
        for (size_t k = 0; k < nfields; k++)                                  \
            f[k] = k + 1;                                                     \
    } while (0)

static void test_values(void)
{
    pn_mem_stats ms;
    size_t first = 0, nfields = sizeof ms / sizeof(uint64_t);
    FILL(ms);
    CHECK_EQ_INT(pn_stat_memory_value(&ms, 0), ms.sampled);
    CHECK_EQ_INT(pn_stat_memory_value(&ms, 1), ms.table_full);
    CHECK_EQ_INT(pn_stat_memory_value(&ms, 2), ms.freed);
    CHECK_EQ_INT(pn_stat_memory_value(&ms, 3), ms.live);
    CHECK_EQ_INT(pn_stat_memory_value(&ms, 4), ms.symbols_full);
    CHECK_EQ_INT(pn_stat_memory_value(&ms, 5), ms.free_probes);
    CHECK(pn_stat_memory_row(6) == NULL);
    CHECK_EQ_INT(pn_stat_memory_value(&ms, 6), 0);

    pn_driver_stats ds;
    memset(&ds, 0, sizeof ds);
    first = offsetof(pn_driver_stats, recorded);
    nfields = (sizeof ds - first) / sizeof(uint64_t);
    FILL(ds);
    const pn_stat_info *r;
    for (size_t i = 0; (r = pn_stat_driver_row(i)); i++) {
        uint64_t want = strcmp(r->name, "recorded") == 0        ? ds.recorded
                        : strcmp(r->name, "requested") == 0     ? ds.requested
                        : strcmp(r->name, "captured") == 0      ? ds.captured
                        : strcmp(r->name, "timeouts") == 0      ? ds.timeouts
                        : strcmp(r->name, "discarded") == 0     ? ds.discarded
                        : strcmp(r->name, "busy") == 0          ? ds.busy
                        : strcmp(r->name, "busy_added") == 0    ? ds.busy_added
                        : strcmp(r->name, "exited") == 0        ? ds.exited
                        : strcmp(r->name, "below_min_cpu") == 0 ? ds.below_min_cpu
                                                                : 0;
        CHECK(want != 0);
        CHECK_EQ_INT(pn_stat_driver_value(&ds, i), want);
    }

    pn_exporter_stats xs;
    memset(&xs, 0, sizeof xs);
    xs.sent = 7;
    xs.failed = 8;
    CHECK_EQ_INT(pn_stat_exporter_value(&xs, 0), 7);
    CHECK_EQ_INT(pn_stat_exporter_value(&xs, 1), 8);
}

TEST_MAIN(T(test_names_unique), T(test_values))
