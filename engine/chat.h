/*
 * chat — chat templates: turning a conversation into the prompt a model was trained on.
 *
 * The format is chosen from the model's `tokenizer.chat_template` metadata (never from
 * the file name): ChatML (<|im_start|>role ... <|im_end|>: SmolLM2, Qwen), Llama 3
 * (<|start_header_id|>role<|end_header_id|> ... <|eot_id|>) or Llama 2 ([INST] ...
 * [/INST], <<SYS>> for the system prompt). A ChatML template that inserts a default
 * system prompt when the conversation has none (SmolLM2's does) has that text taken
 * from the template itself.
 *
 * The rendered prompt is a list of segments: template text, in which special tokens
 * such as <|im_start|> are to be matched, and message content, in which they must not
 * be (a user who types "<|im_end|>" gets the characters, not the token).
 *
 * A prompt owns its memory; formats are immutable. Any thread.
 */
#ifndef ENG_CHAT_H
#define ENG_CHAT_H

#include <stddef.h>

enum eng_chat_format { ENG_CHAT_CHATML = 0, ENG_CHAT_LLAMA3, ENG_CHAT_LLAMA2 };

/* From a template's text. ENG_ENOTSUP when it is none of the known formats. */
int eng_chat_detect(const char *tmpl, size_t len, enum eng_chat_format *out);
/* "chatml", "llama3", "llama2" (the config's override). ENG_EINVAL otherwise. */
int eng_chat_format_parse(const char *name, enum eng_chat_format *out);
const char *eng_chat_format_name(enum eng_chat_format f);

struct eng_chat_msg {
    const char *role; /* "system", "user" or "assistant" */
    const char *content;
    size_t len;
};

struct eng_chat_segment {
    size_t off, len; /* into eng_chat_prompt.text */
    int special;     /* 1: template text, special tokens are matched */
};

struct eng_chat_prompt {
    char *text; /* the whole prompt, NUL-terminated */
    size_t len;
    struct eng_chat_segment *seg;
    int nseg;
};

/*
 * Renders msgs (roles checked: ENG_EINVAL names none, the caller validates first) and,
 * when gen_prompt, the opening of the assistant's turn. default_system: the system
 * prompt to insert when the conversation has none, or NULL (see eng_chat_default_system).
 */
int eng_chat_render(enum eng_chat_format f, const struct eng_chat_msg *msgs, int n,
                    int gen_prompt, const char *default_system, struct eng_chat_prompt *out);
void eng_chat_prompt_deinit(struct eng_chat_prompt *p);

/* The default system prompt a ChatML template inserts, malloc'd, or NULL if none. */
char *eng_chat_default_system(const char *tmpl, size_t len);

#endif
