/* geom_affine.c - the geometry that affine and the geometric sub-ops of
 * auto_augment, rand_augment and trivial_augment_wide (ShearX/Y,
 * TranslateX/Y, Rotate) log for targets (targets.h SP_GEOM_AFFINE and
 * SP_GEOM_ROTATE; docs/pipeline.md "Targets").
 *
 * HOW IT WORKS: the image is sampled through the inverse matrix
 * (ops_rotate.c); boxes and keypoints go through the forward matrix that
 * torchvision v2 builds for them (_get_inverse_affine_matrix with
 * inverted=False, in _affine_bounding_boxes_with_expand and
 * _affine_keypoints), step for step in double: the rotation-scale-shear
 * part [a, b, c, d] of sp__affine_rss() (the project's sine and cosine)
 * times scale, then the centre's translation undone, then the centre and
 * the translation added back, in pixels of the canvas (centre (W/2, H/2),
 * or (0, 0) for the policy's shears, as torchvision's _apply_op). The
 * policy's Rotate logs rotate's step (the float32 theta, transposed).
 * Nothing here touches pixels: the images are those without targets.
 */
#include "augment/pipeline_internal.h"

#include <string.h>
#include "augment/ops_internal.h"

void sp__affine_forward(const double rss[4], double scale, double cx, double cy, double tx,
                        double ty, double m[6]) {
    m[0] = rss[0] * scale;
    m[1] = rss[1] * scale;
    m[2] = 0.0 * scale;
    m[3] = rss[2] * scale;
    m[4] = rss[3] * scale;
    m[5] = 0.0 * scale;
    m[2] += m[0] * -cx + m[1] * -cy;
    m[5] += m[3] * -cx + m[4] * -cy;
    m[2] += cx + tx;
    m[5] += cy + ty;
}

void sp__geom_push(sp_geom_log *log, const sp_geom_step *g) {
    if (log && log->n < SP_GEOM_LOG_MAX) log->step[log->n++] = *g;
}

void sp__geom_step_set(sp_geom_step *g, int kind, int op, int in_w, int in_h, int out_w,
                       int out_h, double x0, double y0, double sx, double sy) {
    memset(g, 0, sizeof *g);
    g->kind = kind;
    g->op = op;
    g->in_w = in_w;
    g->in_h = in_h;
    g->out_w = out_w;
    g->out_h = out_h;
    g->x0 = x0;
    g->y0 = y0;
    g->sx = sx;
    g->sy = sy;
}

int sp__aug_geom_step(int aug, double mag, int W, int H, int k, sp_geom_step *g) {
    memset(g, 0, sizeof *g);
    g->op = k;
    g->in_w = g->out_w = W;
    g->in_h = g->out_h = H;
    if (aug == SP_AUG_ROTATE) {
        float th[6];
        sp__rotation_theta((float)mag, th);
        g->kind = SP_GEOM_ROTATE;
        g->c = th[0];
        g->s = th[1];
        return 1;
    }
    double rss[4] = {1.0, -0.0, 0.0, 1.0}, cx = (double)W * 0.5, cy = (double)H * 0.5;
    double tx = 0.0, ty = 0.0;
    switch (aug) {
    case SP_AUG_SHEAR_X: rss[1] = -mag; cx = cy = 0.0; break;   /* center=[0, 0] */
    case SP_AUG_SHEAR_Y: rss[2] = -mag; cx = cy = 0.0; break;
    case SP_AUG_TRANSLATE_X: tx = (double)(long long)mag; break;   /* int(magnitude) */
    case SP_AUG_TRANSLATE_Y: ty = (double)(long long)mag; break;
    default: return 0;   /* not geometric */
    }
    g->kind = SP_GEOM_AFFINE;
    sp__affine_forward(rss, 1.0, cx, cy, tx, ty, g->m);
    sp__aug_theta(aug, mag, W, H, g->th);   /* masks: the image's inverse map */
    return 1;
}
