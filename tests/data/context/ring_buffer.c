#include <stdlib.h>
#include <string.h>
#include "ring_buffer.h"

#define RB_MIN_CAPACITY 16

typedef struct {
    unsigned char *data;
    size_t capacity;
    size_t head;
    size_t tail;
} ring_buffer;

static size_t rb_next(const ring_buffer *rb, size_t index);

ring_buffer *rb_create(size_t capacity) {
    ring_buffer *rb = malloc(sizeof *rb);
    if (!rb) {
        return NULL;
    }
    if (capacity < RB_MIN_CAPACITY) {
        capacity = RB_MIN_CAPACITY;
    }
    rb->data = calloc(capacity, 1);
    rb->capacity = capacity;
    rb->head = rb->tail = 0;
    return rb;
}

static size_t rb_next(const ring_buffer *rb, size_t index) {
    return (index + 1) % rb->capacity;
}

int rb_push(ring_buffer *rb, unsigned char byte) {
    size_t next = rb_next(rb, rb->head);
    if (next == rb->tail) {
        // cursor here
        return -1;
    }
    rb->data[rb->head] = byte;
    rb->head = next;
    return 0;
}

int rb_pop(ring_buffer *rb, unsigned char *out) {
    if (rb->head == rb->tail) {
        return -1;
    }
    *out = rb->data[rb->tail];
    rb->tail = rb_next(rb, rb->tail);
    return 0;
}

void rb_destroy(ring_buffer *rb) {
    free(rb->data);
    free(rb);
}
