#include "files.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "profile.pb-c.h"

void pn_test_tmpdir(const char *tag, char *buf, size_t cap)
{
    snprintf(buf, cap, "/tmp/pn-%s-XXXXXX", tag);
    if (!mkdtemp(buf))
        buf[0] = 0;
}

void pn_test_rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    char path[512];
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

uint8_t *pn_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    *len = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    return buf;
}

/* A one-sample profile of `type` in function `fn`, as dir/name. */
void pn_test_write_profile(const char *dir, const char *name, const char *type, const char *fn)
{
    char *strings[] = {"", (char *)type, "nanoseconds", (char *)fn, "app.py"};
    Perftools__Profiles__ValueType vt = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
    vt.type = 1;
    vt.unit = 2;
    Perftools__Profiles__ValueType *vts[] = {&vt};
    Perftools__Profiles__Function f = PERFTOOLS__PROFILES__FUNCTION__INIT;
    f.id = 1;
    f.name = 3;
    f.filename = 4;
    Perftools__Profiles__Function *fs[] = {&f};
    Perftools__Profiles__Line line = PERFTOOLS__PROFILES__LINE__INIT;
    line.function_id = 1;
    Perftools__Profiles__Line *lines[] = {&line};
    Perftools__Profiles__Location loc = PERFTOOLS__PROFILES__LOCATION__INIT;
    loc.id = 1;
    loc.n_line = 1;
    loc.line = lines;
    Perftools__Profiles__Location *locs[] = {&loc};
    uint64_t loc_ids[] = {1};
    int64_t values[] = {1000000};
    Perftools__Profiles__Sample s = PERFTOOLS__PROFILES__SAMPLE__INIT;
    s.n_location_id = 1;
    s.location_id = loc_ids;
    s.n_value = 1;
    s.value = values;
    Perftools__Profiles__Sample *samples[] = {&s};
    Perftools__Profiles__Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
    p.n_string_table = 5;
    p.string_table = strings;
    p.n_sample_type = 1;
    p.sample_type = vts;
    p.n_function = 1;
    p.function = fs;
    p.n_location = 1;
    p.location = locs;
    p.n_sample = 1;
    p.sample = samples;
    uint8_t buf[512];
    size_t len = perftools__profiles__profile__pack(&p, buf);
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *out = fopen(path, "wb");
    if (out) {
        fwrite(buf, 1, len, out);
        fclose(out);
    }
}
