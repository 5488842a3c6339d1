/* Euclid attention on the CPU for small score matrices: forward and backward, one head's (Lq, Lk) block at a time.

   softmax(1 / (scale * ||q - k|| + eps)) v on float32, contiguous (N, L, D) arrays, N = batch * heads.
   A head's block stays in the cache from the distances to the softmax and the weighted sum. Sums over the
   head dim or the keys run on 16-float vectors (GCC/Clang vector extensions) over copies padded to 16, so the
   accumulators stay in registers; the element-wise loops over the keys are left to the compiler to vectorize.
   Built and loaded by attnexp/attention/euclid_native.py; the maths and gradients are those of
   attnexp/attention/euclid_small.py. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define W 16 /* floats per vector */
typedef float vec __attribute__((vector_size(W * sizeof(float)), aligned(sizeof(float))));
typedef int32_t ivec __attribute__((vector_size(W * sizeof(int32_t)), aligned(sizeof(int32_t))));

static inline int64_t padded(int64_t n) { return (n + W - 1) / W * W; }

static inline vec load(const float *p) { return *(const vec *)p; }

static inline vec splat(float a) { return (vec){0} + a; }

#if defined(__clang__)
#define SHUFFLE(a, ...) __builtin_shufflevector(a, a, __VA_ARGS__)
#else
#define SHUFFLE(a, ...) __builtin_shuffle(a, (ivec){__VA_ARGS__})
#endif

/* each lane of a paired with the lane `width` away (8, 4, 2, 1), for sums and maxima over the lanes */
#define SWAP8(a) SHUFFLE(a, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7)
#define SWAP4(a) SHUFFLE(a, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11)
#define SWAP2(a) SHUFFLE(a, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13)
#define SWAP1(a) SHUFFLE(a, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14)

static inline vec vmax(vec a, vec b) { /* b where b > a, else a (a NaN in b is passed over) */
    const ivec b_larger = b > a;
    return (vec)(((ivec)b & b_larger) | ((ivec)a & ~b_larger));
}

/* e^x for x <= 0, lane by lane (x = -inf gives 0, NaN stays NaN): 2^n * 2^r with n = round(x log2 e), |r| <= 1/2,
   and 2^r = e^(r ln 2) by its Taylor series to degree 7 (truncation below 1e-8, under float32's rounding). */
static inline vec exp_nonpositive(vec x) {
    vec t = x * 1.44269504088896341f;
    ivec low = t < splat(-126.0f);
    t = (vec)(((ivec)t & ~low) | ((ivec)splat(-126.0f) & low));
    const vec n = (t + 12582912.0f) - 12582912.0f; /* round to nearest: 1.5 * 2^23 leaves no fraction bits */
    const vec y = (t - n) * 0.693147180559945309f;
    vec e = 1.0f + y * (1.0f + y * (0.5f + y * (1.0f / 6 + y * (1.0f / 24 + y * (1.0f / 120 + y * (1.0f / 720 + y * (1.0f / 5040)))))));
    e *= (vec)((__builtin_convertvector(n, ivec) + 127) << 23);
    return (vec)((ivec)e & ~(x < splat(-87.0f)));
}

/* sums and the maximum of x[:n], n a multiple of W: lane by lane, then over the lanes pairwise */
static inline float lanes_sum(vec a) {
    a += SWAP8(a);
    a += SWAP4(a);
    a += SWAP2(a);
    a += SWAP1(a);
    return a[0];
}

static inline float sum_of(const float *x, int64_t n) {
    vec acc = {0};
    for (int64_t j = 0; j < n; j += W) acc += load(x + j);
    return lanes_sum(acc);
}

static inline float dot_of(const float *x, const float *y, int64_t n) {
    vec acc = {0};
    for (int64_t j = 0; j < n; j += W) acc += load(x + j) * load(y + j);
    return lanes_sum(acc);
}

static inline float max_of(const float *x, int64_t n) { /* NaN is passed over */
    vec m = splat(-INFINITY);
    for (int64_t j = 0; j < n; j += W) m = vmax(m, load(x + j));
    m = vmax(m, SWAP8(m));
    m = vmax(m, SWAP4(m));
    m = vmax(m, SWAP2(m));
    m = vmax(m, SWAP1(m));
    return m[0];
}

/* a (rows, cols) -> (rows, stride) with zeros after each row's cols */
static void pad_rows(const float *a, int64_t rows, int64_t cols, int64_t stride, float *out) {
    for (int64_t r = 0; r < rows; r++) {
        memcpy(out + r * stride, a + r * cols, sizeof(float) * (size_t)cols);
        memset(out + r * stride + cols, 0, sizeof(float) * (size_t)(stride - cols));
    }
}

/* a (rows, cols) -> its transpose (cols, stride), each row zero after its first `rows` values */
static void pad_transpose(const float *a, int64_t rows, int64_t cols, int64_t stride, float *out) {
    for (int64_t c = 0; c < cols; c++) {
        for (int64_t r = 0; r < rows; r++) out[c * stride + r] = a[r * cols + c];
        for (int64_t r = rows; r < stride; r++) out[c * stride + r] = 0.0f;
    }
}

/* out[r, c:c+W] = sum over t < count of a[r * ar + t * at] * b[t * bs + c : + W], for r < rows and c < cols (a
   multiple of W): a product of matrices, four rows at a time so that each vector of b loaded serves four sums */
static void matmul(const float *a, int64_t ar, int64_t at, const float *b, int64_t bs, int64_t count, int64_t rows,
                   int64_t cols, float *out, int64_t os) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4)
        for (int64_t c = 0; c < cols; c += W) {
            vec s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
            const float *a0 = a + r * ar;
            for (int64_t t = 0; t < count; t++) {
                const vec bt = load(b + t * bs + c);
                s0 += a0[t * at] * bt;
                s1 += a0[ar + t * at] * bt;
                s2 += a0[2 * ar + t * at] * bt;
                s3 += a0[3 * ar + t * at] * bt;
            }
            *(vec *)(out + r * os + c) = s0;
            *(vec *)(out + (r + 1) * os + c) = s1;
            *(vec *)(out + (r + 2) * os + c) = s2;
            *(vec *)(out + (r + 3) * os + c) = s3;
        }
    for (; r < rows; r++)
        for (int64_t c = 0; c < cols; c += W) {
            vec s0 = {0};
            for (int64_t t = 0; t < count; t++) s0 += a[r * ar + t * at] * load(b + t * bs + c);
            *(vec *)(out + r * os + c) = s0;
        }
}

/* The arguments of one call. */
struct job {
    int64_t Lq, Lk, D, Dv;
    const float *q, *k, *v, *dout;
    const uint8_t *mask;
    float scale, eps;
    float *out, *p, *w, *dq, *dk, *dv; /* p and w: written forward, read backward */
};

/* head(job, n) for the N heads, on `threads` threads of the OpenMP runtime that torch uses (built with -fopenmp,
   the library shares torch's libgomp and its threads); 1 where a head's scratch memory could not be allocated */
static int run(int (*head)(const struct job *, int64_t), struct job job, int64_t N, int threads) {
    int failed = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(| : failed)
    for (int64_t n = 0; n < N; n++) failed |= head(&job, n);
    return failed;
}

static int forward_head(const struct job *job, int64_t n) {
    const int64_t Lq = job->Lq, Lk = job->Lk, D = job->D, Dv = job->Dv;
    const float *q = job->q, *k = job->k, *v = job->v;
    const float eps = job->eps;
    const uint8_t *mask = job->mask;
    float *out = job->out, *p = job->p, *w = job->w;
    const float s2 = job->scale * job->scale;
    const int64_t Lp = padded(Lk), Dp = padded(D), Dvp = padded(Dv);
    float *kt = malloc(sizeof(float) * (size_t)(D * Lp + Lk * Dvp + 2 * Lq * Lp + Lq * (Dvp + Dp) + Lp + 6 * W));
    if (!kt) return 1;
    float *vp = kt + D * Lp + W, *k_sq = vp + Lk * Dvp + W, *Z = k_sq + Lp + W, *P = Z + Lq * Lp + W, *O = P + Lq * Lp + W;
    float *qp = O + Lq * Dvp + W;
    const float *qn = q + n * Lq * D;
    pad_transpose(k + n * Lk * D, Lk, D, Lp, kt); /* (D, Lp) */
    pad_rows(v + n * Lk * Dv, Lk, Dv, Dvp, vp);    /* (Lk, Dvp) */
    for (int64_t j = 0; j < Lp; j += W) {
        vec acc = {0};
        for (int64_t d = 0; d < D; d++) acc += load(kt + d * Lp + j) * load(kt + d * Lp + j);
        *(vec *)(k_sq + j) = acc;
    }
    pad_rows(qn, Lq, D, Dp, qp); /* (Lq, Dp) */
    matmul(qn, D, 1, kt, Lp, D, Lq, Lp, Z, Lp); /* q.k, (Lq, Lp) */
    for (int64_t i = 0; i < Lq; i++) {
        const uint8_t *allowed = mask ? mask + (n * Lq + i) * Lk : NULL;
        float *z = Z + i * Lp, *pp = P + i * Lp, *wi = w ? w + (n * Lq + i) * Lk : NULL;
        const float q_sq = dot_of(qp + i * Dp, qp + i * Dp, Dp);
        for (int64_t j = 0; j < Lk; j++) {
            float x = s2 * (q_sq + k_sq[j] - 2.0f * z[j]);
            float distance = sqrtf(x < 0.0f ? 0.0f : x); /* NaN stays NaN */
            z[j] = 1.0f / (distance + eps);
            if (wi) {
                float g = z[j] * z[j] / distance;
                wi[j] = g < INFINITY ? g : 0.0f; /* inf at distance 0 (and NaN): there the gradient is 0 */
            }
        }
        if (allowed)
            for (int64_t j = 0; j < Lk; j++) z[j] = allowed[j] ? z[j] : -INFINITY;
        for (int64_t j = Lk; j < Lp; j++) z[j] = -INFINITY;
        const float top = max_of(z, Lp);
        if (top == -INFINITY) { /* nothing to attend to: zeros, or NaN where a score is NaN */
            for (int64_t j = 0; j < Lp; j++) pp[j] = isnan(z[j]) ? z[j] : 0.0f;
        } else {
            for (int64_t j = 0; j < Lp; j += W) *(vec *)(pp + j) = exp_nonpositive(load(z + j) - top);
            const vec inv = splat(1.0f / sum_of(pp, Lp));
            for (int64_t j = 0; j < Lp; j += W) *(vec *)(pp + j) = load(pp + j) * inv;
        }
        memcpy(p + (n * Lq + i) * Lk, pp, sizeof(float) * (size_t)Lk);
    }
    matmul(P, Lp, 1, vp, Dvp, Lk, Lq, Dvp, O, Dvp); /* p v, (Lq, Dvp) */
    for (int64_t i = 0; i < Lq; i++) memcpy(out + (n * Lq + i) * Dv, O + i * Dvp, sizeof(float) * (size_t)Dv);
    free(kt);
    return 0;
}

/* out (N, Lq, Dv), p (N, Lq, Lk) the attention weights, w (N, Lq, Lk) = z^2 / distance (0 where that is not
   finite), the score's derivative by the squared distance up to -scale^2 / 2, or NULL without a backward. mask (N, Lq, Lk) or NULL:
   nonzero = may attend; a query that may attend to nothing gets p = 0 and out = 0. */
int euclid_forward(int64_t N, int64_t Lq, int64_t Lk, int64_t D, int64_t Dv, const float *q, const float *k,
                   const float *v, const uint8_t *mask, float scale, float eps, float *out, float *p, float *w,
                   int threads) {
    return run(forward_head, (struct job){.Lq = Lq, .Lk = Lk, .D = D, .Dv = Dv, .q = q, .k = k, .v = v, .mask = mask,
                                          .scale = scale, .eps = eps, .out = out, .p = p, .w = w}, N, threads);
}

static int backward_head(const struct job *job, int64_t n) {
    const int64_t Lq = job->Lq, Lk = job->Lk, D = job->D, Dv = job->Dv;
    const float *q = job->q, *k = job->k, *v = job->v, *p = job->p, *w = job->w, *dout = job->dout;
    float *dq = job->dq, *dk = job->dk, *dv = job->dv;
    const float s2 = job->scale * job->scale;
    const int64_t Lp = padded(Lk), Dp = padded(D), Dvp = padded(Dv);
    float *vt = malloc(sizeof(float) * (size_t)(Dv * Lp + 2 * (Lk + Lq) * Dp + (Lq + Lk) * Dvp + 3 * Lq * Lp + Lp + Lq + 11 * W));
    if (!vt) return 1;
    float *kp = vt + Dv * Lp + W, *qp = kp + Lk * Dp + W, *dop = qp + Lq * Dp + W, *G = dop + Lq * Dvp + W;
    float *P = G + Lq * Lp + W, *dP = P + Lq * Lp + W, *col = dP + Lq * Lp + W, *row = col + Lp + W;
    float *dQ = row + Lq + W, *dK = dQ + Lq * Dp + W, *dV = dK + Lk * Dp + W;
    pad_transpose(v + n * Lk * Dv, Lk, Dv, Lp, vt);  /* (Dv, Lp) */
    pad_rows(k + n * Lk * D, Lk, D, Dp, kp);          /* (Lk, Dp) */
    pad_rows(q + n * Lq * D, Lq, D, Dp, qp);          /* (Lq, Dp) */
    pad_rows(dout + n * Lq * Dv, Lq, Dv, Dvp, dop);   /* (Lq, Dvp) */
    pad_rows(p + n * Lq * Lk, Lq, Lk, Lp, P);         /* (Lq, Lp) */
    pad_rows(w + n * Lq * Lk, Lq, Lk, Lp, G);         /* w, then G in place */
    matmul(dop, Dvp, 1, vt, Lp, Dv, Lq, Lp, dP, Lp);  /* dout v^T, (Lq, Lp) */
    for (int64_t j = 0; j < Lp; j++) col[j] = 0.0f;
    for (int64_t i = 0; i < Lq; i++) {
        float *gi = G + i * Lp, *pi = P + i * Lp, *dpi = dP + i * Lp;
        const vec s = splat(dot_of(pi, dpi, Lp));
        for (int64_t j = 0; j < Lp; j += W) *(vec *)(gi + j) = load(pi + j) * (load(dpi + j) - s) * load(gi + j);
        row[i] = sum_of(gi, Lp);
        for (int64_t j = 0; j < Lp; j += W) *(vec *)(col + j) += load(gi + j);
    }
    matmul(G, Lp, 1, kp, Dp, Lk, Lq, Dp, dQ, Dp);     /* G k, (Lq, Dp) */
    matmul(G, 1, Lp, qp, Dp, Lq, Lk, Dp, dK, Dp);     /* G^T q, (Lk, Dp) */
    matmul(P, 1, Lp, dop, Dvp, Lq, Lk, Dvp, dV, Dvp); /* p^T dout, (Lk, Dvp) */
    for (int64_t i = 0; i < Lq; i++)
        for (int64_t d = 0; d < D; d++) dq[(n * Lq + i) * D + d] = s2 * (dQ[i * Dp + d] - row[i] * qp[i * Dp + d]);
    for (int64_t j = 0; j < Lk; j++) {
        for (int64_t d = 0; d < D; d++) dk[(n * Lk + j) * D + d] = s2 * (dK[j * Dp + d] - col[j] * kp[j * Dp + d]);
        memcpy(dv + (n * Lk + j) * Dv, dV + j * Dvp, sizeof(float) * (size_t)Dv);
    }
    free(vt);
    return 0;
}

/* Gradients of the forward pass's out, from p and w it saved. With G = p * (dout v^T - rowsum(p * dout v^T)) * w:
   dq = scale^2 (G k - rowsum(G) q), dk = scale^2 (G^T q - colsum(G) k), dv = p^T dout. */
int euclid_backward(int64_t N, int64_t Lq, int64_t Lk, int64_t D, int64_t Dv, const float *q, const float *k,
                    const float *v, const float *p, const float *w, const float *dout, float scale, float *dq,
                    float *dk, float *dv, int threads) {
    /* p and w are only read here; the job's fields are shared with the forward pass, which writes them */
    return run(backward_head, (struct job){.Lq = Lq, .Lk = Lk, .D = D, .Dv = Dv, .q = q, .k = k, .v = v, .dout = dout,
                                           .scale = scale, .p = (float *)p, .w = (float *)w, .dq = dq, .dk = dk, .dv = dv},
               N, threads);
}
