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

const pn_stat_info *pn_stat_exporter_row(size_t i)
{
    return i < sizeof exporter_rows / sizeof exporter_rows[0] ? &exporter_rows[i].i : NULL;
}

double pn_stat_exporter_value(const pn_exporter_stats *x, size_t i)
{
    if (!pn_stat_exporter_row(i))
        return 0;
    return (double)*(const uint64_t *)((const char *)x + exporter_rows[i].off);
}
