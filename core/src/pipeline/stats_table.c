/* The agent's counters as data: one row per counter (name, meaning, where
 * it lives in pn_agent_stats), so every binding's stats() is built from
 * one table and names them alike (Node in camelCase). */
#include <stddef.h>

#include "pyroscope_native.h"

typedef enum { U64, I64, REAL, FN } field;

typedef struct {
    pn_stat_info i;
    field f;
    size_t off;
    double (*get)(void); /* FN: process-wide counters */
} stat_row;

static double labels_coerced(void)
{
    uint64_t c, d;
    pn_labels_fix_counts(&c, &d);
    return (double)c;
}

static double labels_dropped(void)
{
    uint64_t c, d;
    pn_labels_fix_counts(&c, &d);
    return (double)d;
}

static double label_sets_live(void)
{
    return (double)pn_labelset_live();
}

#define AT(f) offsetof(pn_agent_stats, f)

static const stat_row rows[] = {
    {{"ticks", "sampler ticks", 0}, U64, AT(sampler.ticks), NULL},
    {{"missed_ticks", "deadlines skipped because a tick overran", 0}, U64,
     AT(sampler.missed_ticks), NULL},
    {{"samples", "stacks the sampler took", 0}, U64, AT(sampler.samples), NULL},
    {{"idle_skipped", "threads skipped by on-CPU mode", 0}, U64, AT(sampler.idle_skipped), NULL},
    {{"syscall_ticks", "ticks read without the fault guard", 0}, U64, AT(sampler.syscall_ticks),
     NULL},
    {{"sampler_cpu_ns", "CPU the sampler thread used", 0}, I64, AT(sampler.sampler_cpu_ns), NULL},
    {{"budget_throttled_ticks", "deadlines skipped to stay in the CPU budget", 0}, U64,
     AT(sampler.budget_throttled_ticks), NULL},
    {{"effective_rate_hz", "the rate now: sample_rate / the budget's stride", 1}, REAL,
     AT(sampler.effective_rate_hz), NULL},
    {{"samples_recorded", "samples recorded by every driver", 0}, U64, AT(samples_recorded), NULL},
    {{"samples_dropped", "samples folded into [overflow] or symbol drops", 0}, U64,
     AT(samples_dropped), NULL},
    {{"late_samples", "batch samples too late for any open period", 0}, U64, AT(late_samples),
     NULL},
    {{"periods", "periods cut", 0}, U64, AT(periods), NULL},
    {{"profiles_encoded", "profiles encoded", 0}, U64, AT(profiles_encoded), NULL},
    {{"encode_errors", "profiles that could not be encoded", 0}, U64, AT(encode_errors), NULL},
    {{"uploads_ok", "payloads accepted", 0}, U64, AT(queue.uploads_ok), NULL},
    {{"uploads_failed", "payloads given up after retries or a 4xx", 0}, U64,
     AT(queue.uploads_failed), NULL},
    {{"uploads_dropped", "payloads dropped: queue full or stop timeout", 0}, U64,
     AT(queue.uploads_dropped), NULL},
    {{"uploads_unconfirmed", "sent whole, the answer never read (a sender at exit)", 0}, U64,
     AT(queue.uploads_unconfirmed), NULL},
    {{"retries", "upload retries", 0}, U64, AT(queue.retries), NULL},
    {{"bytes_sent", "bytes uploaded", 0}, U64, AT(queue.bytes_sent), NULL},
    {{"labels_coerced", "request-time labels fixed (process-wide)", 0}, FN, 0, labels_coerced},
    {{"labels_dropped", "request-time labels dropped (process-wide)", 0}, FN, 0, labels_dropped},
    {{"label_sets_live", "label sets alive now (process-wide)", 0}, FN, 0, label_sets_live},
};

#define NROWS (sizeof rows / sizeof rows[0])

const pn_stat_info *pn_stat_row(size_t i)
{
    return i < NROWS ? &rows[i].i : NULL;
}

double pn_stat_value(const pn_agent_stats *st, size_t i)
{
    if (i >= NROWS)
        return 0;
    const stat_row *r = &rows[i];
    const char *p = (const char *)st + r->off;
    switch (r->f) {
    case U64:
        return (double)*(const uint64_t *)p;
    case I64: {
        int64_t v = *(const int64_t *)p;
        return v > 0 ? (double)v : 0;
    }
    case REAL:
        return *(const double *)p;
    case FN:
        return r->get();
    }
    return 0;
}

/* Counters of one struct, all uint64_t: row i's name, meaning and offset. */
#define ROWS_OF(type, name, rows_)                                                          \
    const pn_stat_info *pn_stat_##name##_row(size_t i)                                     \
    {                                                                                       \
        return i < sizeof rows_ / sizeof rows_[0] ? &rows_[i].i : NULL;                     \
    }                                                                                       \
    double pn_stat_##name##_value(const type *x, size_t i)                                 \
    {                                                                                       \
        if (!pn_stat_##name##_row(i))                                                       \
            return 0;                                                                       \
        return (double)*(const uint64_t *)((const char *)x + rows_[i].off);                 \
    }

/* Each exporter's own counts, "<exporter>_<name>" (http_sent, otlp_failed...). */
static const struct {
    pn_stat_info i;
    size_t off;
} exporter_rows[] = {
    {{"sent", "payloads its receiver accepted", 0}, offsetof(pn_exporter_stats, sent)},
    {{"failed", "payloads given up", 0}, offsetof(pn_exporter_stats, failed)},
    {{"retries", "its retries", 0}, offsetof(pn_exporter_stats, retries)},
    {{"bytes_sent", "bytes it sent", 0}, offsetof(pn_exporter_stats, bytes_sent)},
};

/* A driver's counters (rendezvous: the capture handshake) and a memory
 * driver's, for the bindings whose drivers they are. */
static const struct {
    pn_stat_info i;
    size_t off;
} driver_rows[] = {
    {{"recorded", "samples the driver recorded", 0}, offsetof(pn_driver_stats, recorded)},
    {{"requested", "captures requested of threads", 0}, offsetof(pn_driver_stats, requested)},
    {{"captured", "captures the threads committed", 0}, offsetof(pn_driver_stats, captured)},
    {{"timeouts", "captures not answered in time", 0}, offsetof(pn_driver_stats, timeouts)},
    {{"discarded", "captures abandoned or too late", 0}, offsetof(pn_driver_stats, discarded)},
    {{"busy", "captures asked of a thread whose last one was not consumed yet", 0},
     offsetof(pn_driver_stats, busy)},
    {{"busy_added", "CPU added to a capture not consumed yet", 0},
     offsetof(pn_driver_stats, busy_added)},
    {{"exited", "threads gone when signalled", 0}, offsetof(pn_driver_stats, exited)},
    {{"below_min_cpu", "ticks whose CPU was carried to a later one", 0},
     offsetof(pn_driver_stats, below_min_cpu)},
}, memory_rows[] = {
    {{"memory_sampled", "allocations sampled", 0}, offsetof(pn_mem_stats, sampled)},
    {{"memory_table_full", "sampled allocations with no live-table slot ([overflow])", 0},
     offsetof(pn_mem_stats, table_full)},
    {{"memory_freed", "sampled allocations seen freed", 0}, offsetof(pn_mem_stats, freed)},
    {{"memory_live", "sampled allocations alive now", 0}, offsetof(pn_mem_stats, live)},
    {{"memory_symbols_full", "frames shown as [unknown]: the symbol table is full", 0},
     offsetof(pn_mem_stats, symbols_full)},
    {{"memory_free_probes", "frees the filter let through to the address table", 0},
     offsetof(pn_mem_stats, free_probes)},
};

ROWS_OF(pn_exporter_stats, exporter, exporter_rows)
ROWS_OF(pn_driver_stats, driver, driver_rows)
ROWS_OF(pn_mem_stats, memory, memory_rows)
