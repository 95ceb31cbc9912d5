/* pn_config_set_arg: which runtime types each kind of setting takes, the
 * error code a binding turns into its TypeError, and the runtime's words. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "pyroscope_native.h"

static const pn_arg_words PY = {"a str", "a bool", "a number", "an int", "a str or an int",
                                  "a dict", .int_bool = 1};
static const pn_arg_words RB = {"a String", "true or false", "a number", "an Integer",
                                  "a String", "a Hash", .text_parsed = 1};

static pn_arg text(const char *s) { return (pn_arg){PN_ARG_TEXT, s, strlen(s), .shown = "str"}; }
static pn_arg integer(long long n) { return (pn_arg){PN_ARG_INT, .integer = n, .shown = "int"}; }
static pn_arg number(double d) { return (pn_arg){PN_ARG_FLOAT, .number = d, .shown = "float"}; }
static pn_arg boolean(int b) { return (pn_arg){PN_ARG_BOOL, .boolean = b, .shown = "bool"}; }

/* rc of setting name to v; e's message left for the caller. */
static int set(const char *name, pn_arg v, const pn_arg_words *w, pn_config *c, pn_error *e)
{
    memset(e, 0, sizeof *e);
    return pn_config_set_arg(c, name, &v, w, e);
}

static void test_kinds(void)
{
    pn_config c;
    pn_config_init(&c);
    pn_error e;
    CHECK_EQ_INT(set("sample_rate", integer(250), &PY, &c, &e), 0);
    CHECK(c.sample_rate == 250);
    CHECK_EQ_INT(set("sample_rate", number(99.5), &PY, &c, &e), 0);
    CHECK(c.sample_rate == 99.5);
    CHECK_EQ_INT(set("upload_interval", text("500ms"), &PY, &c, &e), 0); /* durations: text */
    CHECK(c.upload_interval == 0.5);
    CHECK_EQ_INT(set("upload_interval", number(2.5), &PY, &c, &e), 0);
    CHECK(c.upload_interval == 2.5);
    CHECK_EQ_INT(set("oncpu", boolean(0), &PY, &c, &e), 0);
    CHECK_EQ_INT(c.oncpu, 0);
    CHECK_EQ_INT(set("oncpu", integer(1), &PY, &c, &e), 0); /* int_bool */
    CHECK_EQ_INT(c.oncpu, 1);
    CHECK_EQ_INT(set("log_level", integer(40), &PY, &c, &e), 0);
    CHECK_EQ_INT(set("log_level", text("debug"), &PY, &c, &e), 0);
    CHECK_EQ_INT(set("application_name", text("my.app"), &PY, &c, &e), 0);
    CHECK_STR(c.application_name, "my.app");
    pn_label kv[] = {{"k", "v w"}};
    pn_arg pairs = {PN_ARG_PAIRS, .pairs = kv, .npairs = 1, .shown = "dict"};
    CHECK_EQ_INT(set("tags", pairs, &PY, &c, &e), 0);
    CHECK(c.ntags == 1 && strcmp(c.tags[0].value, "v w") == 0);
    pn_config_free(&c);
}

static void test_refusals(void)
{
    pn_config c;
    pn_config_init(&c);
    pn_error e;
    CHECK_EQ_INT(set("sample_rate", text("100"), &PY, &c, &e), -1);
    CHECK_EQ_INT(e.code, PN_ETYPE);
    CHECK_STR(e.msg, "sample_rate must be a number, not str");
    CHECK_EQ_INT(set("sample_rate", boolean(1), &PY, &c, &e), -1);
    CHECK_EQ_INT(e.code, PN_ETYPE);
    CHECK_EQ_INT(set("max_depth", number(1.5), &PY, &c, &e), -1);
    CHECK_STR(e.msg, "max_depth must be an int, not float");
    CHECK_EQ_INT(set("max_depth", number(64), &PY, &c, &e), -1); /* a float, even whole */
    CHECK_EQ_INT(set("upload_interval", number(NAN), &PY, &c, &e), -1);
    CHECK_EQ_INT(e.code, PN_EINVAL);
    CHECK(strstr(e.msg, "upload_interval must be a finite number") != NULL);
    CHECK_EQ_INT(set("oncpu", integer(2), &PY, &c, &e), -1);
    CHECK_STR(e.msg, "oncpu must be a bool, not int");
    CHECK_EQ_INT(set("oncpu", text("yes"), &PY, &c, &e), -1);
    CHECK_EQ_INT(e.code, PN_ETYPE);
    CHECK_EQ_INT(set("tags", text("k=v"), &PY, &c, &e), -1);
    CHECK_STR(e.msg, "tags must be a dict, not str");
    CHECK_EQ_INT(set("application_name", integer(5), &PY, &c, &e), -1);
    CHECK_STR(e.msg, "application_name must be a str, not int");
    CHECK_EQ_INT(set("log_level", number(1.5), &PY, &c, &e), -1);
    CHECK_STR(e.msg, "log_level must be a str or an int, not float");
    pn_arg nul = {PN_ARG_TEXT, "a\0b", 3, .shown = "str"};
    CHECK_EQ_INT(set("application_name", nul, &PY, &c, &e), -1);
    CHECK_STR(e.msg, "application_name must not contain a NUL byte");
    pn_arg other = {PN_ARG_OTHER, .shown = "list"};
    CHECK_EQ_INT(set("server_address", other, &PY, &c, &e), -1);
    CHECK_STR(e.msg, "server_address must be a str, not list");
    /* Text is the core's to judge once the kind takes it. */
    CHECK_EQ_INT(set("upload_interval", text("soon"), &PY, &c, &e), -1);
    CHECK_EQ_INT(e.code, PN_EINVAL);
    CHECK(strncmp(e.msg, "upload_interval", 15) == 0);
    CHECK_EQ_INT(set("no_such_setting", integer(1), &PY, &c, &e), -1);
    CHECK(strstr(e.msg, "no_such_setting") != NULL);
    pn_config_free(&c);
}

/* Ruby's users set numbers and switches from ENV: text is read like a
 * variable there (and refused by the variable's rule), never 0/1 as bools. */
static void test_text_parsed(void)
{
    pn_config c;
    pn_config_init(&c);
    pn_error e;
    CHECK_EQ_INT(set("sample_rate", text("250"), &RB, &c, &e), 0);
    CHECK(c.sample_rate == 250);
    CHECK_EQ_INT(set("oncpu", text("off"), &RB, &c, &e), 0);
    CHECK_EQ_INT(c.oncpu, 0);
    CHECK_EQ_INT(set("sample_rate", text("fast"), &RB, &c, &e), -1);
    CHECK_EQ_INT(e.code, PN_EINVAL);
    CHECK_EQ_INT(set("oncpu", integer(1), &RB, &c, &e), -1);
    CHECK_STR(e.msg, "oncpu must be true or false, not int");
    CHECK_EQ_INT(set("tags", text("k=v"), &RB, &c, &e), -1); /* pairs never from text */
    CHECK_EQ_INT(e.code, PN_ETYPE);
    pn_config_free(&c);
}

TEST_MAIN(T(test_kinds), T(test_refusals), T(test_text_parsed))
