/* tests gateway/metrics.c: the exact Prometheus text of counters, gauges and
 * histograms, label escaping, and registration errors. */
#include "metrics.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

Test(metrics, counter_and_gauge_text)
{
    gw_metrics *r = gw_metrics_create();
    gw_metric *c = gw_metrics_counter(r, "x_requests_total", "Requests.", "route,status");
    gw_metric *g = gw_metrics_gauge(r, "x_open", "Open things.", NULL);
    cr_assert(c && g);
    gw_metric_add(c, 1, "/health", "200");
    gw_metric_add(c, 2, "/health", "200");
    gw_metric_add(c, 1, "/v1/models", "404");
    gw_metric_set(g, 7);
    gw_metric_set(g, 3.5);
    char *text = gw_metrics_render(r, NULL);
    cr_assert_str_eq(text, "# HELP x_requests_total Requests.\n"
                           "# TYPE x_requests_total counter\n"
                           "x_requests_total{route=\"/health\",status=\"200\"} 3\n"
                           "x_requests_total{route=\"/v1/models\",status=\"404\"} 1\n"
                           "# HELP x_open Open things.\n"
                           "# TYPE x_open gauge\n"
                           "x_open 3.5\n");
    free(text);
    gw_metrics_destroy(r);
}

/* A deleted tenant's series go, in every family labelled by tenant; others stay, and a
 * series made again starts from 0 at the end. */
Test(metrics, forgotten_series_leave_every_family)
{
    gw_metrics *r = gw_metrics_create();
    gw_metric *c = gw_metrics_counter(r, "x_total", "Requests.", "tenant,result");
    gw_metric *g = gw_metrics_gauge(r, "x_entries", "Entries.", "tenant");
    gw_metric *u = gw_metrics_gauge(r, "x_open", "Open.", "route");
    cr_assert(c && g && u);
    gw_metric_add(c, 1, "a", "ok");
    gw_metric_add(c, 2, "b", "ok");
    gw_metric_add(c, 3, "a", "error");
    gw_metric_set(g, 5, "a");
    gw_metric_set(g, 6, "b");
    gw_metric_set(u, 1, "a");
    cr_expect_eq(gw_metrics_forget(r, "tenant", "a"), 3);
    cr_expect_eq(gw_metrics_forget(r, "tenant", "a"), 0);
    gw_metric_add(c, 1, "a", "ok");
    char *text = gw_metrics_render(r, NULL);
    cr_assert_str_eq(text, "# HELP x_total Requests.\n"
                           "# TYPE x_total counter\n"
                           "x_total{tenant=\"b\",result=\"ok\"} 2\n"
                           "x_total{tenant=\"a\",result=\"ok\"} 1\n"
                           "# HELP x_entries Entries.\n"
                           "# TYPE x_entries gauge\n"
                           "x_entries{tenant=\"b\"} 6\n"
                           "# HELP x_open Open.\n"
                           "# TYPE x_open gauge\n"
                           "x_open{route=\"a\"} 1\n");
    free(text);
    cr_expect_eq(gw_metrics_forget(r, "tenant", "b"), 2);
    gw_metric_set(g, 1, "c");
    text = gw_metrics_render(r, NULL);
    cr_expect(strstr(text, "x_entries{tenant=\"c\"} 1\n") != NULL, "%s", text);
    free(text);
    gw_metrics_destroy(r);
}

Test(metrics, unlabelled_series_start_at_zero)
{
    gw_metrics *r = gw_metrics_create();
    cr_assert_not_null(gw_metrics_counter(r, "x_refused_total", "Refused.", NULL));
    cr_assert_not_null(gw_metrics_counter(r, "x_by_kind_total", "By kind.", "kind"));
    char *text = gw_metrics_render(r, NULL);
    cr_assert_str_eq(text, "# HELP x_refused_total Refused.\n"
                           "# TYPE x_refused_total counter\n"
                           "x_refused_total 0\n"
                           "# HELP x_by_kind_total By kind.\n"
                           "# TYPE x_by_kind_total counter\n");
    free(text);
    gw_metrics_destroy(r);
}

Test(metrics, histogram_is_cumulative)
{
    static const double bounds[] = {0.1, 1, 10};
    gw_metrics *r = gw_metrics_create();
    gw_metric *h = gw_metrics_histogram(r, "x_seconds", "Latency.", "route", bounds, 3);
    cr_assert_not_null(h);
    gw_metric_observe(h, 0.05, "a");
    gw_metric_observe(h, 0.1, "a"); /* on a bound: counted in that bucket (le) */
    gw_metric_observe(h, 5, "a");
    gw_metric_observe(h, 100, "a");
    char *text = gw_metrics_render(r, NULL);
    cr_assert_str_eq(text, "# HELP x_seconds Latency.\n"
                           "# TYPE x_seconds histogram\n"
                           "x_seconds_bucket{route=\"a\",le=\"0.1\"} 2\n"
                           "x_seconds_bucket{route=\"a\",le=\"1\"} 2\n"
                           "x_seconds_bucket{route=\"a\",le=\"10\"} 3\n"
                           "x_seconds_bucket{route=\"a\",le=\"+Inf\"} 4\n"
                           "x_seconds_sum{route=\"a\"} 105.15000000000001\n"
                           "x_seconds_count{route=\"a\"} 4\n");
    free(text);
    gw_metrics_destroy(r);
}

Test(metrics, escaping)
{
    gw_metrics *r = gw_metrics_create();
    gw_metric *c = gw_metrics_counter(r, "x_total", "Help with \\ and\nnewline.", "v");
    gw_metric_add(c, 1, "quote\" back\\ nl\n");
    char *text = gw_metrics_render(r, NULL);
    cr_assert_str_eq(text, "# HELP x_total Help with \\\\ and\\nnewline.\n"
                           "# TYPE x_total counter\n"
                           "x_total{v=\"quote\\\" back\\\\ nl\\n\"} 1\n");
    free(text);
    gw_metrics_destroy(r);
}

Test(metrics, bad_registrations)
{
    static const double down[] = {1, 0.5};
    gw_metrics *r = gw_metrics_create();
    cr_assert_not_null(gw_metrics_counter(r, "ok_total", "", NULL));
    cr_assert_null(gw_metrics_counter(r, "ok_total", "", NULL), "duplicate name");
    cr_assert_null(gw_metrics_counter(r, "9starts_with_digit", "", NULL));
    cr_assert_null(gw_metrics_counter(r, "has-dash", "", NULL));
    cr_assert_null(gw_metrics_counter(r, "bad_label_total", "", "a,b-c"));
    cr_assert_null(gw_metrics_histogram(r, "h_seconds", "", NULL, down, 2), "bounds descend");
    gw_metrics_destroy(r);
}

static void *hammer(void *arg)
{
    gw_metric *c = arg;
    for (int i = 0; i < 10000; i++)
        gw_metric_add(c, 1, i % 2 ? "odd" : "even");
    return NULL;
}

Test(metrics, concurrent_updates_are_not_lost)
{
    gw_metrics *r = gw_metrics_create();
    gw_metric *c = gw_metrics_counter(r, "n_total", "N.", "k");
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, hammer, c);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    char *text = gw_metrics_render(r, NULL);
    cr_assert(strstr(text, "n_total{k=\"even\"} 20000\n"), "%s", text);
    cr_assert(strstr(text, "n_total{k=\"odd\"} 20000\n"), "%s", text);
    free(text);
    gw_metrics_destroy(r);
}
