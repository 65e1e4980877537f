/* eng_impl.h — details the engine's modules share and its callers do not see. */
#ifndef ENG_IMPL_H
#define ENG_IMPL_H

/* Formats a line for the callback set with eng_set_log(). */
void eng_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
