/*
 * c-first-fit: a memplan planner written in C (docs/writing-a-planner-in-c.md).
 *
 * Algorithm: first fit in order of lifetime start. memplan hands the packer the buffers of one
 * arena; the packer returns an offset for each, and memplan does the rest (constants,
 * persistent tensors, memories and spill, aliases) and checks the plan.
 *   1. Buffers with a fixed offset are placed first, where they must be.
 *   2. The others are taken in order of their first live step (ties: in the order given) and
 *      each goes to the lowest offset that is a multiple of its alignment and overlaps, in
 *      bytes, no placed buffer whose lifetime shares a step with its own.
 *   3. That offset is found by scanning the conflicting placed buffers sorted by offset: the
 *      candidate starts at 0; a buffer ending below it is passed over, one starting at or after
 *      the candidate's end leaves a gap that fits, and any other pushes the candidate past its
 *      end (rounded up to the alignment). The lowest fitting offset is 0 or the aligned end of
 *      some placed buffer, so the scan finds it.
 * Cost: O(n^2 log n) for n buffers (each placement sorts the buffers it conflicts with):
 * fine for the hundreds of tensors of a microcontroller model; a production packer would keep
 * the live buffers in an interval tree.
 *
 * Build: cc -std=c99 -O2 -fPIC -shared -I PATH/TO/plugin-api/include -o libc_first_fit.so first_fit.c
 */
#include <stdio.h>
#include <stdlib.h>

#include "memplan_planner.h"

/* One placed buffer: [offset, end) in bytes. */
typedef struct placed {
    uint64_t offset;
    uint64_t end;
} placed;

/* The order of step 2: by first live step, then by index. */
typedef struct ordered {
    uint32_t first;
    uint64_t index;
} ordered;

static int by_first_step(const void *a, const void *b) {
    const ordered *x = (const ordered *)a;
    const ordered *y = (const ordered *)b;
    if (x->first != y->first) {
        return x->first < y->first ? -1 : 1;
    }
    return x->index < y->index ? -1 : (x->index > y->index ? 1 : 0);
}

static int by_offset(const void *a, const void *b) {
    const placed *x = (const placed *)a;
    const placed *y = (const placed *)b;
    return x->offset < y->offset ? -1 : (x->offset > y->offset ? 1 : 0);
}

static uint64_t align_up(uint64_t value, uint64_t alignment) {
    return (value + alignment - 1) / alignment * alignment;
}

static int lifetimes_overlap(const memplan_buffer *a, const memplan_buffer *b) {
    return a->first <= b->last && b->first <= a->last;
}

/* The lowest offset for `buffer` clear of the `count` conflicting buffers (sorted by offset). */
static uint64_t lowest_fit(const memplan_buffer *buffer, const placed *conflicts, size_t count) {
    uint64_t candidate = 0;
    size_t i;
    for (i = 0; i < count; i++) {
        if (conflicts[i].end <= candidate) {
            continue;
        }
        if (conflicts[i].offset >= candidate + buffer->size) {
            break;
        }
        candidate = align_up(conflicts[i].end, buffer->alignment);
    }
    return candidate;
}

MEMPLAN_PACKER(c_first_fit_pack) {
    const uint64_t n = request->buffer_count;
    const memplan_buffer *buffers = request->buffers;
    ordered *order = (ordered *)malloc(n * sizeof *order);
    placed *conflicts = (placed *)malloc(n * sizeof *conflicts);
    unsigned char *is_placed = (unsigned char *)calloc(n, 1);
    uint64_t i, taken = 0, height = 0;
    char line[128];

    if (order == NULL || conflicts == NULL || is_placed == NULL) {
        free(order);
        free(conflicts);
        free(is_placed);
        return memplan_fail(request, MEMPLAN_FAILED, "c-first-fit: out of memory");
    }
    /* 1. Fixed offsets first. */
    for (i = 0; i < n; i++) {
        if (buffers[i].fixed_offset != MEMPLAN_NO_FIXED_OFFSET) {
            result->offsets[i] = buffers[i].fixed_offset;
            is_placed[i] = 1;
        } else {
            order[taken].first = buffers[i].first;
            order[taken].index = i;
            taken++;
        }
    }
    /* 2. The rest by first live step. */
    qsort(order, (size_t)taken, sizeof *order, by_first_step);
    for (i = 0; i < taken; i++) {
        const uint64_t index = order[i].index;
        size_t count = 0;
        uint64_t j;
        if (i % 256 == 0 && memplan_should_stop(request)) {
            free(order);
            free(conflicts);
            free(is_placed);
            return memplan_fail(request, MEMPLAN_CANCELLED,
                                "c-first-fit: stopped at the time limit before every buffer was placed");
        }
        for (j = 0; j < n; j++) {
            if (is_placed[j] && lifetimes_overlap(&buffers[index], &buffers[j])) {
                conflicts[count].offset = result->offsets[j];
                conflicts[count].end = result->offsets[j] + buffers[j].size;
                count++;
            }
        }
        qsort(conflicts, count, sizeof *conflicts, by_offset);
        result->offsets[index] = lowest_fit(&buffers[index], conflicts, count);
        is_placed[index] = 1;
    }
    for (i = 0; i < n; i++) {
        if (result->offsets[i] + buffers[i].size > height) {
            height = result->offsets[i] + buffers[i].size;
        }
    }
    result->offset_count = n;
    free(order);
    free(conflicts);
    free(is_placed);

    /* The host copies both strings before the callbacks return: a stack buffer will do. */
    snprintf(line, sizeof line, "c-first-fit: %llu buffers in %llu bytes",
             (unsigned long long)n, (unsigned long long)height);
    memplan_log(request, MEMPLAN_LOG_DEBUG, line);
    memplan_set_note(request, "first fit in order of lifetime start (C)");
    return MEMPLAN_OK;
}

MEMPLAN_MANIFEST(MEMPLAN_PLANNER("c-first-fit", "1.0.0",
                                 "first fit in order of lifetime start, written in C",
                                 c_first_fit_pack));
