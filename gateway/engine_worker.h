/*
 * engine_worker — the engine thread: it owns the model's scheduler and runs its
 * continuous-batching loop, taking new jobs and cancellations from the event loop and
 * handing text and completion events back through the completion queue.
 *
 * A job (struct gw_gen_job) is allocated by the caller on the event-loop thread and
 * shared with the engine thread until its done event has been handled on the event loop,
 * which then owns it again (and frees it). Cancellation is a flag the event loop sets;
 * the engine drops the sequence at its next step and still sends the done event.
 */
#ifndef GW_ENGINE_WORKER_H
#define GW_ENGINE_WORKER_H

#include "completion.h"
#include "generate.h"
#include "metrics.h"
#include "scheduler.h"

#include <stdatomic.h>
#include <stdint.h>

struct gw_gen_job;

struct gw_gen_event {
    struct gw_cq_item item;
    struct gw_gen_job *job;
    int done;             /* 0: text; 1: the job is finished */
    int err;              /* done: 0 or an ENG_ error */
    enum eng_finish finish;
    int prompt_tokens, completion_tokens, cached_tokens;
    /* a records event (a job that asked for logprobs): n_lp struct eng_token_lp in lp, just
     * before the text event that carries their tokens' text */
    int n_lp;
    const struct eng_token_lp *lp;
    size_t len;
    char text[]; /* text events */
};

struct gw_gen_job {
    /* set by the submitter */
    int32_t *prompt; /* owned by the job until done */
    int n_prompt;
    /* prefix-cache namespace: jobs share cached KV only within one (their tenant's);
     * 0 is the global namespace, for tenants configured to share it */
    int64_t ns;
    /* whose it is (the tenant): the engine takes turns between them when it admits jobs */
    int64_t party;
    struct eng_gen_params params; /* stop strings owned by the job */
    void (*on_event)(struct gw_gen_event *ev); /* event loop; must free ev */
    void *ud;
    atomic_int cancel;
    /* the worker's */
    struct gw_engw *w;
    struct gw_gen_event *done_ev; /* allocated at submit: the done event cannot fail */
    struct gw_gen_job *next;
    sched_seq *seq;
};

typedef struct gw_engw gw_engw;

/* Takes ownership of nothing; m and v must outlive the worker. */
gw_engw *gw_engw_create(eng_model *m, const tok_vocab *v, const struct sched_config *cfg,
                        int max_waiting, gw_cq *cq, gw_metrics *metrics, char *err,
                        size_t errlen);
/* Stops the thread; every job still held gets a done event (cancelled). Accepts NULL. */
void gw_engw_destroy(gw_engw *w);

/* Event loop. ENG_EFULL when max_waiting jobs already wait beyond what the running batch
 * (max_num_seqs) takes, ENG_ENOMEM. */
int gw_engw_submit(gw_engw *w, struct gw_gen_job *job);
/* Event loop: the job's client went away. */
void gw_engw_cancel(gw_engw *w, struct gw_gen_job *job);

#endif
