/* Uploads through Ruby's own Net::HTTP when libcurl cannot be loaded (an
 * image without libcurl.so.4): the core's relay (pn_http_relay_*) hands each
 * request to a Ruby thread (lib/pyroscope/sender.rb, started by configure
 * only then), which waits here without the GVL, sends it and returns the
 * answer. The core's exporter thread never calls into Ruby. These run on
 * that Ruby thread. */
#include "native.h"

#include <ruby/thread.h>
#include <string.h>

#include "pyroscope_native.h"

static VALUE str_or_nil(const char *s)
{
    return s ? rb_utf8_str_new_cstr(s) : Qnil;
}

/* Native.libcurl_available? */
static VALUE m_libcurl_available(VALUE self)
{
    (void)self;
    return pn_http_libcurl_available() ? Qtrue : Qfalse;
}

/* Native._relay_attach(bool): the sender thread starts (true) or ends. */
static VALUE m_relay_attach(VALUE self, VALUE on)
{
    (void)self;
    pn_http_relay_attach(RTEST(on));
    return Qnil;
}

typedef struct {
    double wait_s;
    pn_http_relayed *got;
} next_args;

static void *next_nogvl(void *p)
{
    next_args *a = p;
    a->got = pn_http_relay_next(a->wait_s);
    return NULL;
}

/* Native._relay_next(wait_s) -> [id, url, [[name, value]], body, user,
 * password, timeout_s, connect_timeout_s, ca_file, ca_dir] or nil. The wait
 * is short (the caller loops), so no unblocking function is needed. */
static VALUE m_relay_next(VALUE self, VALUE wait)
{
    (void)self;
    next_args a = {.wait_s = NUM2DBL(wait)};
    rb_thread_call_without_gvl(next_nogvl, &a, NULL, NULL);
    if (!a.got)
        return Qnil;
    const pn_http_request *r = &a.got->req;
    VALUE headers = rb_ary_new_capa((long)r->nheaders);
    for (size_t i = 0; i < r->nheaders; i++)
        rb_ary_push(headers, rb_assoc_new(str_or_nil(r->headers[i].key),
                                          str_or_nil(r->headers[i].value)));
    VALUE v[] = {ULONG2NUM(a.got->id), str_or_nil(r->url), headers,
                 rb_str_new((const char *)r->body, (long)r->body_len),
                 str_or_nil(r->basic_auth_user), str_or_nil(r->basic_auth_password),
                 DBL2NUM(r->timeout_s), DBL2NUM(r->connect_timeout_s), str_or_nil(r->ca_file),
                 str_or_nil(r->ca_dir)};
    pn_http_relay_free(a.got);
    return rb_ary_new_from_values((long)(sizeof v / sizeof v[0]), v);
}

/* Native._relay_done(id, status, reply, error or nil, permanent). */
static VALUE m_relay_done(VALUE self, VALUE id, VALUE status, VALUE reply, VALUE error,
                          VALUE permanent)
{
    (void)self;
    StringValue(reply);
    const char *err = NIL_P(error) ? NULL : StringValueCStr(error);
    pn_http_relay_done(NUM2ULONG(id), NUM2LONG(status), RSTRING_PTR(reply),
                       (size_t)RSTRING_LEN(reply), err, RTEST(permanent));
    return Qnil;
}

void sender_init(VALUE mNative)
{
    pn_http_relay_install();
    rb_define_module_function(mNative, "libcurl_available?", m_libcurl_available, 0);
    rb_define_module_function(mNative, "_relay_attach", m_relay_attach, 1);
    rb_define_module_function(mNative, "_relay_next", m_relay_next, 1);
    rb_define_module_function(mNative, "_relay_done", m_relay_done, 5);
}
