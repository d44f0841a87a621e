/* cli_sampler.c - the files of the tool's sampler options (include/seedpipe/
 * loader.h "Samplers", docs/determinism.md section 13), which cli_args.c
 * reads with the batch options:
 *
 *   --indices FILE    the loader's samples: these dataset indices, decimal
 *                     digits, one a line (or separated by any white space)
 *   --weights FILE    one weight per sample, a number strtod reads, finite
 *                     and >= 0 (with --replacement or without)
 *
 * The arrays live until the tool exits (the configs of the commands that
 * read them are made again from them: sp_loader_info_get()'s config), and
 * are freed then (atexit), so a leak checker sees none. It calls nothing of
 * the tool's but cli_util.c's file reader: a bad file is a message for
 * cli_args.c to report.
 */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int say(char *why, size_t n, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int say(char *why, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* The white-space separated words of path, NUL-terminated in one buffer
 * (malloc'd); *count of them. NULL with *why on failure. */
static char *read_words(const char *path, size_t *count, char *why, size_t n) {
    size_t len;
    char *buf = cli_read_file(path, &len, why, n);
    if (!buf) return NULL;
    *count = 0;
    for (size_t i = 0; i < len; i++) {
        if (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r') buf[i] = '\0';
        else if (i == 0 || buf[i - 1] == '\0') ++*count;
    }
    if (*count == 0) {
        say(why, n, "%s: the file lists nothing", path);
        free(buf);
        return NULL;
    }
    return buf;
}

static void *owned[16];   /* the arrays given to configs, freed at exit */
static int nowned;

static void free_owned(void) {
    while (nowned > 0) free(owned[--nowned]);
}

/* p kept until exit (freed now when there is no room: never, in practice). */
static int keep(void *p) {
    if (nowned == 0) atexit(free_owned);
    if (nowned == (int)(sizeof owned / sizeof owned[0])) return -1;
    owned[nowned++] = p;
    return 0;
}

/* The next word at or after *p (skipping NULs); *p moves past it. */
static const char *next_word(char **p) {
    while (**p == '\0') (*p)++;
    const char *w = *p;
    *p += strlen(w);
    return w;
}

/* Decimal digits only, the whole word, below 2^64. */
static int parse_index(const char *w, uint64_t *v) {
    *v = 0;
    if (!*w) return -1;
    for (; *w; w++) {
        if (*w < '0' || *w > '9' || *v > (UINT64_MAX - (uint64_t)(*w - '0')) / 10) return -1;
        *v = *v * 10 + (uint64_t)(*w - '0');
    }
    return 0;
}

int cli_sampler_files(const char *indices, const char *weights, sp_loader_config *cfg,
                      char *why, size_t n) {
    size_t count;
    char *buf, *p;
    if (indices) {
        if (!(buf = p = read_words(indices, &count, why, n))) return -1;
        uint64_t *idx = malloc(count * sizeof *idx);
        int rc = idx ? 0 : say(why, n, "%s: out of memory", indices);
        for (size_t k = 0; rc == 0 && k < count; k++) {
            const char *w = next_word(&p);
            if (parse_index(w, &idx[k]) != 0)
                rc = say(why, n, "%s: word %zu, \"%s\", is not a decimal index", indices, k + 1, w);
        }
        free(buf);
        if (rc == 0 && keep(idx) != 0) rc = say(why, n, "%s: too many index lists", indices);
        if (rc != 0) return free(idx), -1;
        cfg->indices = idx;
        cfg->nindices = count;
    }
    if (weights) {
        if (!(buf = p = read_words(weights, &count, why, n))) return -1;
        double *w = malloc(count * sizeof *w);
        int rc = w ? 0 : say(why, n, "%s: out of memory", weights);
        for (size_t k = 0; rc == 0 && k < count; k++) {
            const char *s = next_word(&p);
            char *end;
            w[k] = strtod(s, &end);
            if (*end || end == s || !isfinite(w[k]) || w[k] < 0)
                rc = say(why, n, "%s: word %zu, \"%s\", is not a finite number >= 0", weights,
                         k + 1, s);
        }
        free(buf);
        if (rc == 0 && keep(w) != 0) rc = say(why, n, "%s: too many weight lists", weights);
        if (rc != 0) return free(w), -1;
        cfg->weights = w;
        cfg->nweights = count;
    }
    return 0;
}
