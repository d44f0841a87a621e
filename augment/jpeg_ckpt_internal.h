/* augment/jpeg_ckpt_internal.h - JPEG entropy checkpoints (jpeg_ckpt.c),
 * for decode.c (which makes them when a file is checked) and decode_jpeg.c
 * (which starts a crop's decode from one). Not a public header.
 *
 * A crop of a validated JPEG stops after its last row, but Huffman data
 * has no random access: every row above it is still entropy-decoded. The
 * checkpoints of a baseline file say where each iMCU row's data starts
 * (byte and bit) and what the DC predictors are there, so a crop lower in
 * the image can start decoding near its first row. They are made once, when
 * the file's full decode is checked, and kept by the dataset index with
 * the verdict (dataset/dataset_index.c); docs/pipeline.md, "Decoding only
 * what the crop needs", has the design and its proof of equal pixels.
 */
#ifndef SEEDPIPE_AUGMENT_JPEG_CKPT_INTERNAL_H
#define SEEDPIPE_AUGMENT_JPEG_CKPT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* At most this many checkpoints a file (evenly spaced iMCU rows): the
 * table is at most 6 + 64 * 20 bytes, typically 5-6 bytes a row. */
#define SP__JPEG_CKPT_MAX 64

/*! sp__jpeg_ckpt_make() : the checkpoint table of buf, a JPEG whose full
 *  decode succeeded (one walk of its Huffman codes), into a malloc'd *out
 *  of *out_len bytes. Only baseline or extended sequential Huffman files,
 *  8-bit, of 1 (1x1) or 3 components in one interleaved scan, without a
 *  restart interval and of two or more iMCU rows have one.
 *  @return 1 (made), 0 (none for this file: *out NULL, *out_len 0) or
 *  SP_ENOMEM. */
int sp__jpeg_ckpt_make(const uint8_t *buf, size_t len, uint8_t **out, size_t *out_len);

/* A stream to decode a crop from: the head (malloc'd) is the file's
 * markers up to its scan data with the frame's height changed and, when
 * it starts at a checkpoint, one made-up iMCU row ending where the
 * checkpoint's row starts and the byte the two share; the file's bytes
 * from buf + tail on follow it. Row y of the file is row y - rows_above of
 * that stream; checkpoint: the iMCU row it starts at (0: the scan's start). */
typedef struct sp__jpeg_resume {
    uint8_t *head;
    size_t head_len;
    size_t tail;
    int rows_above;
    int checkpoint;
} sp__jpeg_resume;

/*! sp__jpeg_ckpt_resume() : the stream that decodes rows [y, y_end) of
 *  buf (scale 1) as a full decode gives them: from the last checkpoint of
 *  ck[0..ck_len) that leaves them one row of real data above (fancy
 *  upsampling reads it), with the frame ending after the iMCU row the
 *  last of them needs. ck is the table made for these bytes; a table
 *  that does not fit the file (another file's, damaged) is not used, and
 *  any table gives a stream libjpeg reads safely: only the pixels would
 *  differ.
 *  @return 1 (*out filled; free out->head), 0 (nothing to gain: the crop
 *  is near the top and reaches the bottom, the file's tables lack a code
 *  the made-up row needs, or the table does not fit) or SP_ENOMEM. */
int sp__jpeg_ckpt_resume(const uint8_t *buf, size_t len, const uint8_t *ck, size_t ck_len,
                         int y, int y_end, sp__jpeg_resume *out);

#endif
