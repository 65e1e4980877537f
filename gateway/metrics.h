/*
 * metrics — a registry of counters, gauges and histograms with labels, rendered in the
 * Prometheus text exposition format (version 0.0.4) for GET /metrics.
 *
 * A family (gw_metric) is registered once with its label names; each distinct tuple of
 * label values is a series, created on first use. Families live until the registry is
 * destroyed, series until then or gw_metrics_forget(). Every function is thread-safe (one
 * mutex per registry): worker threads update, the event loop renders.
 */
#ifndef GW_METRICS_H
#define GW_METRICS_H

#include <stddef.h>

typedef struct gw_metrics gw_metrics;
typedef struct gw_metric gw_metric;

gw_metrics *gw_metrics_create(void);
void gw_metrics_destroy(gw_metrics *reg); /* accepts NULL */

/*
 * Registers a family. labels is a comma-separated list of label names ("route,status")
 * or NULL. Counter names should end in _total and names carry units (_seconds, _bytes).
 * Returns NULL on a bad name, a duplicate name or no memory. The family is owned by the
 * registry.
 */
gw_metric *gw_metrics_counter(gw_metrics *reg, const char *name, const char *help,
                              const char *labels);
gw_metric *gw_metrics_gauge(gw_metrics *reg, const char *name, const char *help,
                            const char *labels);
/* bounds: ascending upper bounds, copied; +Inf is implicit. */
gw_metric *gw_metrics_histogram(gw_metrics *reg, const char *name, const char *help,
                                const char *labels, const double *bounds, int nbounds);

/*
 * Updates the series named by the label values that follow (one const char * per label
 * name of the family, in order). Return 0, or -1 when no memory for a new series.
 */
int gw_metric_add(gw_metric *m, double v, ...);     /* counter (v >= 0) or gauge */
int gw_metric_set(gw_metric *m, double v, ...);     /* gauge */
int gw_metric_observe(gw_metric *m, double v, ...); /* histogram */

/* Drops every series, in every family with the label, whose label has the value (a deleted
 * tenant's): a counter that comes back starts again from 0. Returns how many. */
int gw_metrics_forget(gw_metrics *reg, const char *label, const char *value);

/* Renders every family. Returns a malloc'd NUL-terminated string (caller frees), or NULL. */
char *gw_metrics_render(gw_metrics *reg, size_t *len /* out, may be NULL */);

#endif
