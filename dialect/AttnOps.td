// Operations of the attn dialect.
#ifndef ATTNC_DIALECT_ATTNOPS_TD
#define ATTNC_DIALECT_ATTNOPS_TD

include "dialect/AttnDialect.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

// Element types of user tensors; f16/bf16 accumulate in f32.
def Attn_FloatTensor : RankedTensorOf<[F32, F16, BF16]>;
// Scores and probabilities are always f32.
def Attn_ScoreTensor : RankedTensorOf<[F32]>;
// Per-batch key lengths for key padding.
def Attn_LengthsTensor : RankedTensorOf<[I32, I64]>;

//===----------------------------------------------------------------------===//
// Projections
//===----------------------------------------------------------------------===//

def Attn_ProjectionOp : Attn_Op<"projection", [Pure]> {
  let summary = "X W split into heads";
  let description = [{
    Projects activations X[B,S,E] with W[E,H*D] and splits the result into
    heads: `out[b,h,s,d] = sum_e X[b,s,e] * W[e, h*D + d]`. H and D come from
    the result type. Accumulation is in f32 for f16/bf16 inputs.

    ```mlir
    %q = attn.projection %x, %wq : tensor<2x128x512xf32>, tensor<512x512xf32>
                                   -> tensor<2x8x128x64xf32>
    ```
  }];
  let arguments = (ins Attn_FloatTensor:$input, Attn_FloatTensor:$weight);
  let results = (outs Attn_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Attn_MergeOp : Attn_Op<"merge", [Pure]> {
  let summary = "Concatenate heads and apply the output projection";
  let description = [{
    `Y[b,s,e] = sum_{h,dv} O[b,h,s,dv] * Wo[h*Dv + dv, e]` for O[B,H,S,Dv] and
    Wo[H*Dv,E]; Y is [B,S,E].

    ```mlir
    %y = attn.merge %o, %wo : tensor<2x8x128x64xf32>, tensor<512x512xf32>
                              -> tensor<2x128x512xf32>
    ```
  }];
  let arguments = (ins Attn_FloatTensor:$input, Attn_FloatTensor:$weight);
  let results = (outs Attn_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` type($input) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Scores, scale, masks, score mods, softmax, apply
//===----------------------------------------------------------------------===//

def Attn_ScoresOp : Attn_Op<"scores", [Pure]> {
  let summary = "Attention scores Q K^T, with GQA/MQA";
  let description = [{
    `S[b,h,i,j] = sum_d Q[b,h,i,d] * K[b, h / (H/Hkv), j, d]` for Q[B,H,Sq,D]
    and K[B,Hkv,Skv,D] with H % Hkv == 0 (Hkv == 1 is MQA). S is f32.

    ```mlir
    %s = attn.scores %q, %k : tensor<1x8x64x32xf32>, tensor<1x2x96x32xf32>
                              -> tensor<1x8x64x96xf32>
    ```
  }];
  let arguments = (ins Attn_FloatTensor:$query, Attn_FloatTensor:$key);
  let results = (outs Attn_ScoreTensor:$result);
  let assemblyFormat = [{
    $query `,` $key attr-dict `:` type($query) `,` type($key) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Attn_ScaleOp : Attn_Op<"scale", [Pure, AllTypesMatch<["scores", "result"]>]> {
  let summary = "Multiply scores by a constant";
  let description = [{
    `result = factor * scores`. Without `by`, the factor is 1/sqrt(D), where D
    is the head dimension of the `attn.scores` op that must produce `scores`.

    ```mlir
    %t = attn.scale %s by 0.125 : tensor<1x8x64x96xf32>
    %u = attn.scale %s : tensor<1x8x64x96xf32>   // 1/sqrt(D)
    ```
  }];
  let arguments = (ins Attn_ScoreTensor:$scores, OptionalAttr<F64Attr>:$factor);
  let results = (outs Attn_ScoreTensor:$result);
  let assemblyFormat = [{
    $scores (`by` $factor^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The factor this op multiplies by (the explicit one or 1/sqrt(D)).
    double getEffectiveFactor();
  }];
}

def Attn_ScoreModOp : Attn_Op<"score_mod",
    [Pure, IsolatedFromAbove, AllTypesMatch<["scores", "result"]>]> {
  let summary = "Modify each score with a region";
  let description = [{
    `result[b,h,i,j] = region(scores[b,h,i,j], b, h, i, j, captures...)`. The
    region has one block with arguments `(f32, index, index, index, index,
    captured tensor types...)` and yields one f32 with `attn.yield`. Its ops
    must be free of side effects (arith, math, tensor.extract of captures).
    Captured floating-point tensors are differentiable inputs.

    ALiBi with per-head slopes:
    ```mlir
    %t = attn.score_mod %s captures(%slopes : tensor<8xf32>) : tensor<1x8x64x64xf32> {
    ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<8xf32>):
      %m = tensor.extract %sl[%h] : tensor<8xf32>
      %d = arith.subi %j, %i : index
      %di = arith.index_cast %d : index to i64
      %df = arith.sitofp %di : i64 to f32
      %bias = arith.mulf %m, %df : f32
      %r = arith.addf %score, %bias : f32
      attn.yield %r : f32
    }
    ```
  }];
  let arguments = (ins Attn_ScoreTensor:$scores, Variadic<AnyRankedTensor>:$captures);
  let results = (outs Attn_ScoreTensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $scores (`captures` `(` $captures^ `:` type($captures) `)`)? attr-dict `:` type($result) $body
  }];
  let hasVerifier = 1;
}

def Attn_MaskOp : Attn_Op<"mask",
    [Pure, IsolatedFromAbove, AttrSizedOperandSegments,
     AllTypesMatch<["scores", "result"]>]> {
  let summary = "Set masked-out scores to -inf";
  let description = [{
    `result[b,h,i,j] = visible(b,h,i,j) ? scores[b,h,i,j] : -inf`, where
    `visible` is the conjunction of every condition given:
    - `causal`: j <= i (top-left aligned, also when Sq != Skv);
    - `window W` (W >= 1): j <= i and i - j < W (sliding window);
    - `lengths(%len)`: j < len[b] (key padding; len is i32 or i64, size B);
    - `varlen(%cu)`: packed variable-length sequences (FlashAttention's
      cu_seqlens): cu (i32 or i64, n + 1 >= 2 entries, the same for every
      batch entry and head) cuts the rows and the keys alike into the n
      sequences [cu[d], cu[d+1]), and j is visible to i only when both lie
      in one of them; rows and keys outside every sequence see and are seen
      by nothing. Needs Sq == Skv and no `cache`. causal and window then act
      within each sequence, on the packed positions i and j, which the
      regions receive too. cu must be nondecreasing with cu[0] >= 0 and
      cu[n] <= Skv: the CPU entry points return ATTNC_STATUS_BAD_SIZE,
      writing nothing, for one that is not (the GPU kernels do not check
      them). The kernels skip the key blocks outside the sequences of a
      query block's rows;
    - a `mask_mod` region over (b, h, i, j, captures...) yielding i1.
    `cache` (with causal or window) makes the keys a KV cache: batch b holds
    its first n_b keys (n_b = len[b] clamped to [0, Skv] with `lengths`,
    else Skv; Skv is the capacity) and the queries are its last Sq tokens,
    so row i sits at position p = n_b - Sq + i and causal and window compare
    j with p instead of i (bottom-right aligned; rows with p < 0 see
    nothing). One kernel then serves every decoding step and every chunk of
    a chunked prefill: the caller appends the new keys and values and passes
    the new lengths. The regions still receive the row i. A cache's
    lengths must lie in [0, Skv]: the CPU entry points return
    ATTNC_STATUS_BAD_SIZE, writing nothing, for one outside.
    A row whose every key is masked yields zero probabilities and output.
    With `zero_fill`, masked entries become 0 instead of -inf: the mask's
    gradient, as attn-derive-backward emits it.
    The keywords come in the order of the op's syntax;
    `custom<MaskKeywordCheck>` parses nothing, it reports a misspelt or
    misplaced keyword.

    ```mlir
    %m = attn.mask %s causal window 256 lengths(%len : tensor<2xi32>)
        : tensor<2x8x512x512xf32>
    %d = attn.mask %s captures(%doc : tensor<512xi32>) : tensor<1x8x512x512xf32> {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<512xi32>):
      %di = tensor.extract %ids[%i] : tensor<512xi32>
      %dj = tensor.extract %ids[%j] : tensor<512xi32>
      %same = arith.cmpi eq, %di, %dj : i32
      attn.yield %same : i1
    }
    ```
  }];
  let arguments = (ins Attn_ScoreTensor:$scores, UnitAttr:$causal,
                   UnitAttr:$zero_fill, OptionalAttr<I64Attr>:$window,
                   UnitAttr:$cache,
                   Optional<Attn_LengthsTensor>:$lengths,
                   Optional<Attn_LengthsTensor>:$varlen,
                   Variadic<AnyRankedTensor>:$captures);
  let results = (outs Attn_ScoreTensor:$result);
  let regions = (region MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $scores (`causal` $causal^)? (`window` $window^)? (`cache` $cache^)?
    (`lengths` `(` $lengths^ `:` type($lengths) `)`)?
    (`varlen` `(` $varlen^ `:` type($varlen) `)`)?
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    (`zero_fill` $zero_fill^)? `` custom<MaskKeywordCheck>(ref($window))
    attr-dict `:` type($result) ($mask_mod^)?
  }];
  let hasVerifier = 1;
}

def Attn_SoftmaxOp : Attn_Op<"softmax", [Pure, AllTypesMatch<["scores", "result"]>]> {
  let summary = "Numerically stable softmax over the key dimension";
  let description = [{
    `P[b,h,i,j] = exp(S[b,h,i,j] - m_i) / sum_j exp(S[b,h,i,j] - m_i)` with
    `m_i = max_j S[b,h,i,j]`; a row that is entirely -inf gives P = 0.

    ```mlir
    %p = attn.softmax %s : tensor<1x8x64x64xf32>
    ```
  }];
  let arguments = (ins Attn_ScoreTensor:$scores);
  let results = (outs Attn_ScoreTensor:$result);
  let assemblyFormat = "$scores attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Attn_ApplyOp : Attn_Op<"apply", [Pure]> {
  let summary = "Probabilities times values, P V, with GQA/MQA";
  let description = [{
    `O[b,h,i,dv] = sum_j P[b,h,i,j] * V[b, h / (H/Hkv), j, dv]` for P[B,H,Sq,Skv]
    (f32) and V[B,Hkv,Skv,Dv]; O has V's element type (f32 accumulation).

    ```mlir
    %o = attn.apply %p, %v : tensor<1x8x64x96xf32>, tensor<1x2x96x16xf32>
                             -> tensor<1x8x64x16xf32>
    ```
  }];
  let arguments = (ins Attn_ScoreTensor:$probs, Attn_FloatTensor:$value);
  let results = (outs Attn_FloatTensor:$result);
  let assemblyFormat = [{
    $probs `,` $value attr-dict `:` type($probs) `,` type($value) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

def Attn_AttentionOp : Attn_Op<"attention",
    [Pure, IsolatedFromAbove, AttrSizedOperandSegments]> {
  let summary = "Fused attention over Q, K, V returning O and LSE";
  let description = [{
    The whole chain scores -> scale -> score_mod -> mask -> softmax -> apply in
    one op: for Q[B,H,Sq,D], K[B,Hkv,Skv,D], V[B,Hkv,Skv,Dv] it returns
    O[B,H,Sq,Dv] (V's element type) and LSE[B,H,Sq] (f32), where
    `LSE_i = log sum_j exp(S'_ij)` over the visible keys (-inf for a fully
    masked row, whose O row is 0). `scale` defaults to 1/sqrt(D). The mask
    options are those of `attn.mask`; the optional `score_mod` region has the
    signature of `attn.score_mod` over `score_captures`, the optional
    `mask_mod` region that of `attn.mask` over `mask_captures` (`cache`
    places the queries at the end of each batch's keys, as there; with
    `pages(%table)` the cache is paged, see below). The keywords
    come in the order of the op's syntax, the regions after the result
    types (score_mod first); `custom<AttentionKeywordCheck>` parses nothing,
    it reports a misspelt or misplaced keyword (`casual`: "did you mean
    'causal'?"). attn-derive-backward differentiates it into
    `attn.attention_grad`: Q, K, V and float `score_captures` get gradients;
    `lengths` and `mask_captures` do not (in `@f_bwd`, a float tensor that
    only a mask_mod reads gets a gradient of zeros).

    ```mlir
    %o, %lse = attn.attention %q, %k, %v causal window 128
        : tensor<1x8x256x64xbf16>, tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16>
          -> tensor<1x8x256x64xbf16>, tensor<1x8x256xf32>
    ```

    A paged KV cache (the layout of vLLM and FlashAttention's paged entry
    points): with `cache`, `pages(%table : tensor<BxMxi32>)` makes K and V
    pools of pages, K[N,Hkv,P,D] and V[N,Hkv,P,Dv] (N pages of P tokens
    each), and %table[b, m] the page that holds batch b's tokens
    [m P, (m + 1) P). The cache's capacity (Skv for every mask and region)
    is M P; `lengths` gives each batch's tokens. Only the pages that hold a
    batch's first `lengths[b]` tokens are read, and each of their entries
    must lie in [0, N) (the exported entry point checks it). Inference
    only: attn-derive-backward rejects a paged op (`--no-backward`).
    ```mlir
    %o, %lse = attn.attention %q, %kp, %vp causal cache
        lengths(%len : tensor<2xi32>) pages(%table : tensor<2x4xi32>)
        : tensor<2x8x1x64xbf16>, tensor<16x2x256x64xbf16>, tensor<16x2x256x64xbf16>
          -> tensor<2x8x1x64xbf16>, tensor<2x8x1xf32>
    ```

    A per-head bias (score_mod over a captured tensor) and document masking
    (mask_mod over captured document ids: query i sees key j only within
    its document):
    ```mlir
    %o, %lse = attn.attention %q, %k, %v causal score_captures(%bias : tensor<8xf32>)
        mask_captures(%doc : tensor<256xi32>)
        : tensor<1x8x256x64xf32>, tensor<1x2x256x64xf32>, tensor<1x2x256x64xf32>
          -> tensor<1x8x256x64xf32>, tensor<1x8x256xf32>
        score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bi: tensor<8xf32>):
      %c = tensor.extract %bi[%h] : tensor<8xf32>
      %r = arith.addf %s, %c : f32
      attn.yield %r : f32
    } mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<256xi32>):
      %di = tensor.extract %ids[%i] : tensor<256xi32>
      %dj = tensor.extract %ids[%j] : tensor<256xi32>
      %same = arith.cmpi eq, %di, %dj : i32
      attn.yield %same : i1
    }
    ```
  }];
  let arguments = (ins Attn_FloatTensor:$query, Attn_FloatTensor:$key,
                   Attn_FloatTensor:$value, OptionalAttr<F64Attr>:$scale,
                   UnitAttr:$causal, OptionalAttr<I64Attr>:$window,
                   UnitAttr:$cache,
                   Optional<Attn_LengthsTensor>:$lengths,
                   Optional<Attn_LengthsTensor>:$varlen,
                   Optional<Attn_LengthsTensor>:$pages,
                   Variadic<AnyRankedTensor>:$score_captures,
                   Variadic<AnyRankedTensor>:$mask_captures);
  let results = (outs Attn_FloatTensor:$output, Attn_ScoreTensor:$lse);
  let regions = (region MaxSizedRegion<1>:$score_mod, MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`scale` $scale^)? (`causal` $causal^)?
    (`window` $window^)? (`cache` $cache^)?
    (`lengths` `(` $lengths^ `:` type($lengths) `)`)?
    (`varlen` `(` $varlen^ `:` type($varlen) `)`)?
    (`pages` `(` $pages^ `:` type($pages) `)`)?
    (`score_captures` `(` $score_captures^ `:` type($score_captures) `)`)?
    (`mask_captures` `(` $mask_captures^ `:` type($mask_captures) `)`)?
    `` custom<AttentionKeywordCheck>(ref($window))
    attr-dict `:` type($query) `,` type($key) `,` type($value) `->`
    type($output) `,` type($lse) (`score_mod` $score_mod^)? (`mask_mod` $mask_mod^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The scale this op applies (the explicit one or 1/sqrt(D)).
    double getEffectiveScale();
  }];
}


def Attn_AttentionStatsOp : Attn_Op<"attention_stats",
    [Pure, IsolatedFromAbove, AttrSizedOperandSegments,
     AttrSizedResultSegments]> {
  let summary = "Statistics of attention's probabilities, never storing them";
  let description = [{
    For the probabilities `P = exp(S' - LSE)` of an `attn.attention` over
    Q[B,H,Sq,D] and K[B,Hkv,Skv,D] with the same options and regions (S' its
    scaled, modified and masked scores) and that op's LSE[B,H,Sq], returns
    the statistics named after `->` (at least one, in this order), all f32:
    - `entropy` [B,H,Sq]: `-sum_j P_ij log P_ij = LSE_i - sum_j P_ij S'_ij`
      per row (0 for a row that sees no key);
    - `mean_entropy` [B,H]: the mean of the entropy over the rows that see a
      key (0 when none does);
    - `pooled` [B,H,Gq,Gk]: P averaged over a Gq x Gk grid of cells (the
      result type gives the grid; cell I holds rows
      [floor(I Sq / Gq), floor((I + 1) Sq / Gq)), keys likewise), masked
      entries counting as 0: a heatmap at any sequence length;
    - `similarity` [B,H,H]: the cosine similarity of the heads' attention
      distributions, `<P_h, P_g> / (|P_h| |P_g|)` over all (i, j) (0 where a
      head attends nowhere).
    The kernels recompute P tile by tile from LSE and never store it (CPU,
    Vulkan and CUDA). A row whose softmax is
    undefined (a score of +inf or NaN) makes its statistics NaN. `lse` must
    be the LSE of the same attention (for any other value the results are
    those of `exp(S' - lse)`). attn-derive-backward differentiates
    `entropy` and `mean_entropy` (entropy regularisation), into
    `attn.attention_stats_grad` and the LSE's gradient; `pooled` and
    `similarity` are forward only: the backward treats them as constants
    (their cotangents are ignored, as after torch's `detach`).

    ```mlir
    %o, %lse = attn.attention %q, %k, %v causal
        : tensor<1x8x256x64xf32>, tensor<1x2x256x64xf32>, tensor<1x2x256x64xf32>
          -> tensor<1x8x256x64xf32>, tensor<1x8x256xf32>
    %h, %map = attn.attention_stats %q, %k, %lse causal
        : tensor<1x8x256x64xf32>, tensor<1x2x256x64xf32>, tensor<1x8x256xf32>
          -> entropy tensor<1x8x256xf32> pooled tensor<1x8x64x64xf32>
    ```
  }];
  let arguments = (ins Attn_FloatTensor:$query, Attn_FloatTensor:$key,
                   Attn_ScoreTensor:$lse, OptionalAttr<F64Attr>:$scale,
                   UnitAttr:$causal, OptionalAttr<I64Attr>:$window,
                   Optional<Attn_LengthsTensor>:$lengths,
                   Variadic<AnyRankedTensor>:$score_captures,
                   Variadic<AnyRankedTensor>:$mask_captures);
  let results = (outs Optional<Attn_ScoreTensor>:$entropy,
                  Optional<Attn_ScoreTensor>:$mean_entropy,
                  Optional<Attn_ScoreTensor>:$pooled,
                  Optional<Attn_ScoreTensor>:$similarity);
  let regions = (region MaxSizedRegion<1>:$score_mod, MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $query `,` $key `,` $lse (`scale` $scale^)? (`causal` $causal^)?
    (`window` $window^)? (`lengths` `(` $lengths^ `:` type($lengths) `)`)?
    (`score_captures` `(` $score_captures^ `:` type($score_captures) `)`)?
    (`mask_captures` `(` $mask_captures^ `:` type($mask_captures) `)`)?
    `` custom<AttentionKeywordCheck>(ref($window))
    attr-dict `:` type($query) `,` type($key) `,` type($lse) `->`
    (`entropy` type($entropy)^)? (`mean_entropy` type($mean_entropy)^)?
    (`pooled` type($pooled)^)? (`similarity` type($similarity)^)?
    (`score_mod` $score_mod^)? (`mask_mod` $mask_mod^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The scale this op applies (the explicit one or 1/sqrt(D)).
    double getEffectiveScale();
  }];
}

def Attn_AppendOp : Attn_Op<"append",
    [Pure, AllTypesMatch<["cache", "result"]>]> {
  let summary = "Append new keys (or values) to a KV cache, in place";
  let description = [{
    Writes the T new rows of `rows` [B, Hkv, T, D] into the cache at each
    sequence's last T positions, `[len[b] - T, len[b])`, and returns the
    cache: `lengths` holds the tokens each sequence has after the append,
    as the `lengths` of an `attn.attention ... cache` that reads the result
    does. Row t of batch b goes to position p = len[b] - T + t; rows with
    p < 0 (when len[b] < T) are not written, and the cache's other rows keep
    their values. The cache is [B, Hkv, C, D] (capacity C), or with
    `pages(%table : tensor<BxMxi32>)` a pool of pages [N, Hkv, P, D] whose
    position p of batch b is row p mod P of page %table[b, p / P] (as
    `attn.attention ... pages`). Lengths must lie in [0, capacity] and the
    table's entries in [0, N): the CPU entry points check them first and
    return ATTNC_STATUS_BAD_SIZE, writing nothing, otherwise.

    The result is the cache's buffer: in a kernel, the cache must be an
    argument of the kernel that nothing else reads, and the kernel writes
    the new rows into the caller's memory (the generated header declares
    that pointer non-const, "updated in place"); nothing else of the cache
    is read or copied, whatever its capacity. Inference only:
    attn-derive-backward rejects it (`--no-backward`).

    ```mlir
    %k1 = attn.append %knew, %k lengths(%len : tensor<2xi32>)
        : tensor<2x2x1x64xbf16> into tensor<2x2x256x64xbf16>
    %o, %lse = attn.attention %q, %k1, %v1 causal cache lengths(%len : tensor<2xi32>)
        : ...
    ```
  }];
  let arguments = (ins Attn_FloatTensor:$rows, Attn_FloatTensor:$cache,
                   Attn_LengthsTensor:$lengths,
                   Optional<Attn_LengthsTensor>:$pages);
  let results = (outs Attn_FloatTensor:$result);
  let assemblyFormat = [{
    $rows `,` $cache `lengths` `(` $lengths `:` type($lengths) `)`
    (`pages` `(` $pages^ `:` type($pages) `)`)?
    attr-dict `:` type($rows) `into` type($cache)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The positions the cache holds per sequence: C, or M P when paged.
    int64_t getCapacity();
    /// Whether `value` is the cache of some attn.append (whose buffer the
    /// kernel then writes).
    static bool isAppendedTo(mlir::Value value);
  }];
}

def Attn_CombineOp : Attn_Op<"combine", [Pure, AttrSizedOperandSegments]> {
  let summary = "Exact merge of partial attention results (O, LSE) over disjoint keys";
  let description = [{
    Given the results (O_k, LSE_k) of the same queries attending to disjoint
    sets of keys (the chunks of split-KV decoding, or the shards of
    context-parallel "ring" attention), returns the attention over their
    union: `LSE = log sum_k exp(LSE_k)` and `O = sum_k exp(LSE_k - LSE) O_k`
    (computed in f32 from the largest LSE_k). A row no part saw (every
    LSE_k = -inf) gets O = 0 and LSE = -inf; a NaN or +inf LSE_k makes its
    row NaN. Every O_k is [B, H, Sq, Dv] of one float type, every LSE_k
    [B, H, Sq] f32; the results have the same types. Differentiable:
    attn-derive-backward emits `attn.combine_grad`.

    ```mlir
    %o, %lse = attn.combine %o1, %o2 lse %lse1, %lse2
        : tensor<1x8x128x64xf32>, tensor<1x8x128x64xf32>
          lse tensor<1x8x128xf32>, tensor<1x8x128xf32>
          -> tensor<1x8x128x64xf32>, tensor<1x8x128xf32>
    ```
  }];
  let arguments = (ins Variadic<Attn_FloatTensor>:$outputs,
                   Variadic<Attn_ScoreTensor>:$lses);
  let results = (outs Attn_FloatTensor:$output, Attn_ScoreTensor:$lse);
  let assemblyFormat = [{
    $outputs `lse` $lses attr-dict `:` type($outputs) `lse` type($lses) `->`
    type($output) `,` type($lse)
  }];
  let hasVerifier = 1;
}


//===----------------------------------------------------------------------===//
// Gradient ops (emitted by attn-derive-backward; users may write them too)
//===----------------------------------------------------------------------===//

def Attn_ProjectionGradOp : Attn_Op<"projection_grad", [Pure]> {
  let summary = "Gradients of attn.projection";
  let description = [{
    For `Y = attn.projection X, W` and the gradient dY[B,H,S,D]:
    `dX[b,s,e] = sum_{h,d} dY[b,h,s,d] * W[e, h*D + d]` and
    `dW[e, h*D + d] = sum_{b,s} X[b,s,e] * dY[b,h,s,d]`.

    ```mlir
    %dx, %dw = attn.projection_grad %x, %w, %dy
        : tensor<2x16x32xf32>, tensor<32x32xf32>, tensor<2x4x16x8xf32>
          -> tensor<2x16x32xf32>, tensor<32x32xf32>
    ```
  }];
  let arguments = (ins Attn_FloatTensor:$input, Attn_FloatTensor:$weight,
                   Attn_FloatTensor:$grad);
  let results = (outs Attn_FloatTensor:$input_grad,
                  Attn_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $grad attr-dict `:` type($input) `,` type($weight)
    `,` type($grad) `->` type($input_grad) `,` type($weight_grad)
  }];
  let hasVerifier = 1;
}

def Attn_MergeGradOp : Attn_Op<"merge_grad", [Pure]> {
  let summary = "Gradients of attn.merge";
  let description = [{
    For `Y = attn.merge O, Wo` and the gradient dY[B,S,E]:
    `dO[b,h,s,dv] = sum_e dY[b,s,e] * Wo[h*Dv + dv, e]` and
    `dWo[h*Dv + dv, e] = sum_{b,s} O[b,h,s,dv] * dY[b,s,e]`.

    ```mlir
    %do, %dwo = attn.merge_grad %o, %wo, %dy
        : tensor<2x4x16x8xf32>, tensor<32x32xf32>, tensor<2x16x32xf32>
          -> tensor<2x4x16x8xf32>, tensor<32x32xf32>
    ```
  }];
  let arguments = (ins Attn_FloatTensor:$input, Attn_FloatTensor:$weight,
                   Attn_FloatTensor:$grad);
  let results = (outs Attn_FloatTensor:$input_grad,
                  Attn_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $grad attr-dict `:` type($input) `,` type($weight)
    `,` type($grad) `->` type($input_grad) `,` type($weight_grad)
  }];
  let hasVerifier = 1;
}

def Attn_TransposedApplyOp : Attn_Op<"transposed_apply", [Pure]> {
  let summary = "X^T Y summed over the query heads of each KV head";
  let description = [{
    `R[b,g,j,d] = sum_{h in group g} sum_i X[b,h,i,j] * Y[b,h,i,d]` for
    X[B,H,Sq,Skv] (f32) and Y[B,H,Sq,D]; R is [B,Hkv,Skv,D] with Y's element
    type, where query head h belongs to KV head h / (H/Hkv). It computes
    dV = P^T dO and dK = dS^T Q, GQA sums included.

    ```mlir
    %dv = attn.transposed_apply %p, %do : tensor<1x8x64x96xf32>,
        tensor<1x8x64x16xf32> -> tensor<1x2x96x16xf32>
    ```
  }];
  let arguments = (ins Attn_ScoreTensor:$lhs, Attn_FloatTensor:$rhs);
  let results = (outs Attn_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Attn_SoftmaxGradOp : Attn_Op<"softmax_grad",
    [Pure, AllTypesMatch<["probs", "grad", "result"]>]> {
  let summary = "Gradient of attn.softmax";
  let description = [{
    `dS[b,h,i,j] = P[b,h,i,j] * (dP[b,h,i,j] - sum_k P[b,h,i,k] * dP[b,h,i,k])`
    for the probabilities P and their gradient dP.

    ```mlir
    %ds = attn.softmax_grad %p, %dp : tensor<1x8x64x64xf32>
    ```
  }];
  let arguments = (ins Attn_ScoreTensor:$probs, Attn_ScoreTensor:$grad);
  let results = (outs Attn_ScoreTensor:$result);
  let assemblyFormat = "$probs `,` $grad attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Attn_ScoreModGradOp : Attn_Op<"score_mod_grad",
    [Pure, IsolatedFromAbove, AllTypesMatch<["scores", "grad", "scores_grad"]>]> {
  let summary = "Gradients of attn.score_mod";
  let description = [{
    For `S' = attn.score_mod S captures(c...)` with region f and the gradient
    dS': `dS[b,h,i,j] = dS'[b,h,i,j] * df/dscore` and, for each captured
    tensor with a float element type,
    `dc[idx] = sum_{b,h,i,j} dS'[b,h,i,j] * df/dc[idx]`, accumulated in
    (b, h, i, j) order (deterministic). Integer captures get zero gradients.
    The region is f itself; its ops must have gradient rules.

    ```mlir
    %ds, %dslopes = attn.score_mod_grad %s, %dsp captures(%slopes : tensor<8xf32>)
        : tensor<1x8x64x64xf32> -> tensor<8xf32> {
    ^bb0(%score: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<8xf32>):
      ...
    }
    ```
  }];
  let arguments = (ins Attn_ScoreTensor:$scores, Attn_ScoreTensor:$grad,
                   Variadic<AnyRankedTensor>:$captures);
  let results = (outs Attn_ScoreTensor:$scores_grad,
                  Variadic<AnyRankedTensor>:$captures_grad);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $scores `,` $grad (`captures` `(` $captures^ `:` type($captures) `)`)?
    attr-dict `:` type($scores) (`->` type($captures_grad)^)? $body
  }];
  let hasVerifier = 1;
}

def Attn_AttentionGradOp : Attn_Op<"attention_grad",
    [Pure, IsolatedFromAbove, AttrSizedOperandSegments]> {
  let summary = "Gradients of attn.attention (FlashAttention-2 form)";
  let description = [{
    Given the inputs of an `attn.attention` (same options and regions), its
    outputs O and LSE, and the gradients dO (and optionally dLSE), returns
    dQ, dK, dV and one gradient per score capture. P is recomputed from LSE:
    `P = exp(S' - LSE)`, `dP = dO V^T`, `Delta_i = rowsum(dO * O)`,
    `dS' = P * (dP - Delta + dLSE)`, `dS = dS' * dscore_mod/dS`,
    `dQ = scale dS K`, `dK = scale dS^T Q`, `dV = P^T dO` (GQA: dK, dV sum over
    the query heads of each KV head).

    ```mlir
    %dq, %dk, %dv = attn.attention_grad %q, %k, %v, %o, %lse, %do causal
        : tensor<1x8x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>,
          tensor<1x8x64x32xf32>, tensor<1x8x64xf32>, tensor<1x8x64x32xf32>
          -> tensor<1x8x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x2x64x32xf32>
    ```
  }];
  let arguments = (ins Attn_FloatTensor:$query, Attn_FloatTensor:$key,
                   Attn_FloatTensor:$value, Attn_FloatTensor:$output,
                   Attn_ScoreTensor:$lse, Attn_FloatTensor:$output_grad,
                   Optional<Attn_ScoreTensor>:$lse_grad,
                   OptionalAttr<F64Attr>:$scale,
                   UnitAttr:$causal, OptionalAttr<I64Attr>:$window,
                   UnitAttr:$cache,
                   Optional<Attn_LengthsTensor>:$lengths,
                   Optional<Attn_LengthsTensor>:$varlen,
                   Variadic<AnyRankedTensor>:$score_captures,
                   Variadic<AnyRankedTensor>:$mask_captures);
  let results = (outs Attn_FloatTensor:$query_grad, Attn_FloatTensor:$key_grad,
                  Attn_FloatTensor:$value_grad,
                  Variadic<AnyRankedTensor>:$score_captures_grad);
  let regions = (region MaxSizedRegion<1>:$score_mod, MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $lse `,` $output_grad
    (`lse_grad` `(` $lse_grad^ `:` type($lse_grad) `)`)?
    (`scale` $scale^)? (`causal` $causal^)?
    (`window` $window^)? (`cache` $cache^)?
    (`lengths` `(` $lengths^ `:` type($lengths) `)`)?
    (`varlen` `(` $varlen^ `:` type($varlen) `)`)?
    (`score_captures` `(` $score_captures^ `:` type($score_captures) `)`)?
    (`mask_captures` `(` $mask_captures^ `:` type($mask_captures) `)`)?
    `` custom<AttentionGradKeywordCheck>(ref($window))
    attr-dict `:` type($query) `,` type($key) `,` type($value) `,`
    type($output) `,` type($lse) `,` type($output_grad) `->`
    type($query_grad) `,` type($key_grad) `,` type($value_grad)
    (`,` type($score_captures_grad)^)?
    (`score_mod` $score_mod^)? (`mask_mod` $mask_mod^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The scale this op applies (the explicit one or 1/sqrt(D)).
    double getEffectiveScale();
  }];
}

def Attn_AttentionStatsGradOp : Attn_Op<"attention_stats_grad",
    [Pure, IsolatedFromAbove, AttrSizedOperandSegments]> {
  let summary = "Gradients of attn.attention_stats's entropies";
  let description = [{
    Given the inputs of an `attn.attention_stats` (same options and regions)
    and the cotangents of its `entropy` [B,H,Sq] and/or `mean_entropy`
    [B,H] (at least one), returns dQ, dK, the gradient of its `lse` operand
    and one gradient per score capture. With `g_i` the row's cotangent (the
    mean's shared among the rows that see a key), `P = exp(S' - LSE)` and
    the entropy `H_i = sum_j P_ij (LSE_i - S'_ij)` as the forward computes
    it for any `lse`: `dS'_ij = g_i P_ij (LSE_i - S'_ij - 1)` and
    `dLSE_i = g_i sum_j P_ij (1 + S'_ij - LSE_i)` (its partial derivatives;
    when `lse` is the attention's own, through that LSE's gradient the
    total is `-g_i P_ij (S'_ij - mu_i)` with `mu_i = sum_j P_ij S'_ij`),
    then as in `attn.attention_grad`:
    `dS = dS' * dscore_mod/dS`, `dQ = scale dS K`, `dK = scale dS^T Q`.

    ```mlir
    %dq, %dk, %dlse = attn.attention_stats_grad %q, %k, %lse
        entropy_grad(%dh : tensor<1x8x64xf32>) causal
        : tensor<1x8x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x8x64xf32>
          -> tensor<1x8x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x8x64xf32>
    ```
  }];
  let arguments = (ins Attn_FloatTensor:$query, Attn_FloatTensor:$key,
                   Attn_ScoreTensor:$lse,
                   Optional<Attn_ScoreTensor>:$entropy_grad,
                   Optional<Attn_ScoreTensor>:$mean_entropy_grad,
                   OptionalAttr<F64Attr>:$scale,
                   UnitAttr:$causal, OptionalAttr<I64Attr>:$window,
                   Optional<Attn_LengthsTensor>:$lengths,
                   Variadic<AnyRankedTensor>:$score_captures,
                   Variadic<AnyRankedTensor>:$mask_captures);
  let results = (outs Attn_FloatTensor:$query_grad, Attn_FloatTensor:$key_grad,
                  Attn_ScoreTensor:$lse_grad,
                  Variadic<AnyRankedTensor>:$score_captures_grad);
  let regions = (region MaxSizedRegion<1>:$score_mod, MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $query `,` $key `,` $lse
    (`entropy_grad` `(` $entropy_grad^ `:` type($entropy_grad) `)`)?
    (`mean_entropy_grad` `(` $mean_entropy_grad^ `:` type($mean_entropy_grad) `)`)?
    (`scale` $scale^)? (`causal` $causal^)?
    (`window` $window^)? (`lengths` `(` $lengths^ `:` type($lengths) `)`)?
    (`score_captures` `(` $score_captures^ `:` type($score_captures) `)`)?
    (`mask_captures` `(` $mask_captures^ `:` type($mask_captures) `)`)?
    `` custom<AttentionStatsGradKeywordCheck>(ref($window))
    attr-dict `:` type($query) `,` type($key) `,` type($lse) `->`
    type($query_grad) `,` type($key_grad) `,` type($lse_grad)
    (`,` type($score_captures_grad)^)?
    (`score_mod` $score_mod^)? (`mask_mod` $mask_mod^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The scale this op applies (the explicit one or 1/sqrt(D)).
    double getEffectiveScale();
  }];
}

//===----------------------------------------------------------------------===//
// Attention distillation
//===----------------------------------------------------------------------===//

def Attn_DistillOp : Attn_Op<"distill",
    [Pure, IsolatedFromAbove, AttrSizedOperandSegments]> {
  let summary = "KL divergence of a teacher's attention from a student's";
  let description = [{
    Attention distillation: per query row, `KL(P_t || P_s)` between the
    attention distributions of a teacher and a student over the same keys,
    from each side's Q and K and the LSE of each side's `attn.attention`
    (never storing P). The student's operands come first:
    Q_s[B,H,Sq,Ds], K_s[B,Hkv_s,Skv,Ds] and LSE_s[B,H,Sq], then after
    `teacher` Q_t[B,H,Sq,Dt], K_t[B,Hkv_t,Skv,Dt] and LSE_t[B,H,Sq]: B, H,
    Sq and Skv are the same, the head dimensions, the KV head counts (GQA
    per side, as in `attn.scores`) and the element types may differ.
    `scale` (default 1/sqrt(Ds)) scales the student's scores,
    `teacher_scale` (default 1/sqrt(Dt)) the teacher's; the mask options
    and the optional `mask_mod` region (as in `attn.attention`) apply to
    both sides. This version takes no `score_mod` region. With
    `S = scale Q K^T`, `P_t = exp(S_t - LSE_t)` and, over the visible keys,
    `r_ij = (S_t,ij - LSE_t,i) - (S_s,ij - LSE_s,i)` (log P_t - log P_s):
    `KL_i = sum_j P_t,ij r_ij`. Masked keys add nothing (never 0 * inf); a
    row whose teacher LSE is -inf (it sees no key) has KL 0. The result
    type chooses the result: `tensor<BxHxSqxf32>` is the KL per row,
    `tensor<f32>` its mean over the rows that see a key (0 when none does).
    The LSEs must be those of the same attentions (for other values the
    result is that of the formulas above). attn-derive-backward
    differentiates it into `attn.distill_grad`, whose LSE gradients flow on
    into each side's `attn.attention_grad`. The kernels (CPU, Vulkan and
    CUDA) compute the KL and its gradients from both sides' score tiles a
    key block at a time, never an Sq x Skv buffer.

    ```mlir
    %os, %ls = attn.attention %qs, %ks, %vs causal
        : tensor<1x8x128x32xf32>, tensor<1x2x128x32xf32>, tensor<1x2x128x32xf32>
          -> tensor<1x8x128x32xf32>, tensor<1x8x128xf32>
    %ot, %lt = attn.attention %qt, %kt, %vt causal
        : tensor<1x8x128x64xf32>, tensor<1x8x128x64xf32>, tensor<1x8x128x64xf32>
          -> tensor<1x8x128x64xf32>, tensor<1x8x128xf32>
    %kl = attn.distill %qs, %ks, %ls teacher %qt, %kt, %lt causal
        : tensor<1x8x128x32xf32>, tensor<1x2x128x32xf32>, tensor<1x8x128xf32>
          teacher tensor<1x8x128x64xf32>, tensor<1x8x128x64xf32>, tensor<1x8x128xf32>
          -> tensor<f32>
    ```
  }];
  let arguments = (ins Attn_FloatTensor:$query, Attn_FloatTensor:$key,
                   Attn_ScoreTensor:$lse, Attn_FloatTensor:$teacher_query,
                   Attn_FloatTensor:$teacher_key, Attn_ScoreTensor:$teacher_lse,
                   OptionalAttr<F64Attr>:$scale,
                   OptionalAttr<F64Attr>:$teacher_scale,
                   UnitAttr:$causal, OptionalAttr<I64Attr>:$window,
                   Optional<Attn_LengthsTensor>:$lengths,
                   Variadic<AnyRankedTensor>:$mask_captures);
  let results = (outs Attn_ScoreTensor:$kl);
  let regions = (region MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $query `,` $key `,` $lse `teacher` $teacher_query `,` $teacher_key `,`
    $teacher_lse (`scale` $scale^)? (`teacher_scale` $teacher_scale^)?
    (`causal` $causal^)? (`window` $window^)?
    (`lengths` `(` $lengths^ `:` type($lengths) `)`)?
    (`mask_captures` `(` $mask_captures^ `:` type($mask_captures) `)`)?
    `` custom<DistillKeywordCheck>(ref($window))
    attr-dict `:` type($query) `,` type($key) `,` type($lse) `teacher`
    type($teacher_query) `,` type($teacher_key) `,` type($teacher_lse) `->`
    type($kl) `` custom<DistillRegionCheck>(ref($window))
    (`mask_mod` $mask_mod^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The scale of the student's scores (the explicit one or 1/sqrt(Ds)).
    double getEffectiveScale();
    /// The scale of the teacher's scores (the explicit one or 1/sqrt(Dt)).
    double getEffectiveTeacherScale();
    /// Whether the result is the mean (tensor<f32>), not the KL per row.
    bool isMean();
  }];
}

def Attn_DistillGradOp : Attn_Op<"distill_grad",
    [Pure, IsolatedFromAbove, AttrSizedOperandSegments]> {
  let summary = "Gradients of attn.distill";
  let description = [{
    Given the operands of an `attn.distill` (same options and region) and
    the cotangent of its result after `grad` (of its type: per row, or the
    mean's scalar), returns dQ_s, dK_s, dLSE_s, dQ_t, dK_t and dLSE_t: the
    partial derivatives with both LSEs held fixed (attn-derive-backward
    carries the LSE gradients into each side's `attn.attention_grad`). With
    `g_i` the row's cotangent (the mean's shared among the rows that see a
    key, 0 on the others), `P_t` and `r` as in `attn.distill`:
    `dS_s,ij = -g_i P_t,ij`, `dLSE_s,i = g_i sum_j P_t,ij`,
    `dS_t,ij = g_i P_t,ij (r_ij + 1)`,
    `dLSE_t,i = -g_i sum_j P_t,ij (r_ij + 1)`, then per side
    `dQ = scale dS K`, `dK = scale dS^T Q` (GQA: dK sums over the query heads
    of each KV head).

    ```mlir
    %dqs, %dks, %dls, %dqt, %dkt, %dlt = attn.distill_grad %qs, %ks, %ls
        teacher %qt, %kt, %lt grad %dkl causal
        : tensor<1x8x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x8x64xf32>
          teacher tensor<1x8x64x64xf32>, tensor<1x8x64x64xf32>, tensor<1x8x64xf32>
          grad tensor<1x8x64xf32>
          -> tensor<1x8x64x32xf32>, tensor<1x2x64x32xf32>, tensor<1x8x64xf32>,
             tensor<1x8x64x64xf32>, tensor<1x8x64x64xf32>, tensor<1x8x64xf32>
    ```
  }];
  let arguments = (ins Attn_FloatTensor:$query, Attn_FloatTensor:$key,
                   Attn_ScoreTensor:$lse, Attn_FloatTensor:$teacher_query,
                   Attn_FloatTensor:$teacher_key, Attn_ScoreTensor:$teacher_lse,
                   Attn_ScoreTensor:$kl_grad,
                   OptionalAttr<F64Attr>:$scale,
                   OptionalAttr<F64Attr>:$teacher_scale,
                   UnitAttr:$causal, OptionalAttr<I64Attr>:$window,
                   Optional<Attn_LengthsTensor>:$lengths,
                   Variadic<AnyRankedTensor>:$mask_captures);
  let results = (outs Attn_FloatTensor:$query_grad, Attn_FloatTensor:$key_grad,
                  Attn_ScoreTensor:$lse_grad,
                  Attn_FloatTensor:$teacher_query_grad,
                  Attn_FloatTensor:$teacher_key_grad,
                  Attn_ScoreTensor:$teacher_lse_grad);
  let regions = (region MaxSizedRegion<1>:$mask_mod);
  let assemblyFormat = [{
    $query `,` $key `,` $lse `teacher` $teacher_query `,` $teacher_key `,`
    $teacher_lse `grad` $kl_grad (`scale` $scale^)?
    (`teacher_scale` $teacher_scale^)? (`causal` $causal^)?
    (`window` $window^)? (`lengths` `(` $lengths^ `:` type($lengths) `)`)?
    (`mask_captures` `(` $mask_captures^ `:` type($mask_captures) `)`)?
    `` custom<DistillKeywordCheck>(ref($window))
    attr-dict `:` type($query) `,` type($key) `,` type($lse) `teacher`
    type($teacher_query) `,` type($teacher_key) `,` type($teacher_lse)
    `grad` type($kl_grad) `->` type($query_grad) `,` type($key_grad) `,`
    type($lse_grad) `,` type($teacher_query_grad) `,`
    type($teacher_key_grad) `,` type($teacher_lse_grad)
    `` custom<DistillRegionCheck>(ref($window)) (`mask_mod` $mask_mod^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The scale of the student's scores (the explicit one or 1/sqrt(Ds)).
    double getEffectiveScale();
    /// The scale of the teacher's scores (the explicit one or 1/sqrt(Dt)).
    double getEffectiveTeacherScale();
    /// Whether kl_grad is the mean's (tensor<f32>), not per row.
    bool isMean();
  }];
}

def Attn_CombineGradOp : Attn_Op<"combine_grad", [Pure, AttrSizedOperandSegments]> {
  let summary = "Gradients of attn.combine";
  let description = [{
    Given the partial results of an `attn.combine` and the gradients dO (and
    optionally dLSE) of its results, returns dO_k for every O_k, then dLSE_k
    for every LSE_k (the combined O and LSE are recomputed):
    `a_k = exp(LSE_k - LSE)`, `dO_k = a_k dO`,
    `dLSE_k = a_k (dLSE + rowsum(dO * (O_k - O)))`.

    ```mlir
    %do1, %do2, %dl1, %dl2 = attn.combine_grad %o1, %o2 lse %l1, %l2 grad %do
        : tensor<1x8x128x64xf32>, tensor<1x8x128x64xf32>
          lse tensor<1x8x128xf32>, tensor<1x8x128xf32> grad tensor<1x8x128x64xf32>
          -> tensor<1x8x128x64xf32>, tensor<1x8x128x64xf32>,
             tensor<1x8x128xf32>, tensor<1x8x128xf32>
    ```
  }];
  let arguments = (ins Variadic<Attn_FloatTensor>:$outputs,
                   Variadic<Attn_ScoreTensor>:$lses,
                   Attn_FloatTensor:$output_grad,
                   Optional<Attn_ScoreTensor>:$lse_grad);
  let results = (outs Variadic<AnyRankedTensor>:$grads);
  let assemblyFormat = [{
    $outputs `lse` $lses `grad` $output_grad
    (`lse_grad` `(` $lse_grad^ `:` type($lse_grad) `)`)? attr-dict `:`
    type($outputs) `lse` type($lses) `grad` type($output_grad) `->`
    type($grads)
  }];
  let hasVerifier = 1;
}

def Attn_YieldOp : Attn_Op<"yield",
    [Pure, Terminator, ReturnLike,
     ParentOneOf<["ScoreModOp", "MaskOp", "AttentionOp", "ScoreModGradOp",
                  "AttentionGradOp", "AttentionStatsOp",
                  "AttentionStatsGradOp", "DistillOp", "DistillGradOp"]>]> {
  let summary = "Yield the value of a score_mod or mask_mod region";
  let description = [{
    Terminates a `score_mod` region (one f32) or a `mask_mod` region (one i1).

    ```mlir
    attn.yield %r : f32
    ```
  }];
  let arguments = (ins AnyType:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

#endif // ATTNC_DIALECT_ATTNOPS_TD
