#include "oai.h"

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

json_t *oai_error(const char *message, const char *type, const char *param, const char *code)
{
    json_t *e = json_object();
    json_object_set_new(e, "message", json_string(message));
    json_object_set_new(e, "type", json_string(type));
    json_object_set_new(e, "param", str_or_null(param));
    json_object_set_new(e, "code", str_or_null(code));
    json_t *o = json_object();
    json_object_set_new(o, "error", e);
    return o;
}

const char *oai_error_type(int status)
{
    if (status == 401)
        return "authentication_error";
    if (status == 403)
        return "permission_error";
    if (status == 429)
        return "rate_limit_error";
    if (status >= 500)
        return "server_error";
    return "invalid_request_error";
}

char *oai_error_dumps(int status, const char *message, const char *param, const char *code)
{
    json_t *o = oai_error(message, oai_error_type(status), param, code);
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}
