// RUN: attnc-opt %s -split-input-file -attn-derive-backward | FileCheck %s

// attn.distill's rule: the KL's cotangent gives one attn.distill_grad (with
// the op's options and mask_mod), whose dLSE_s and dLSE_t reach each side's
// attn.attention_grad as its lse_grad and whose dQ and dK add to each
// side's. The teacher's O is not returned: its attention_grad gets a dO of
// zeros (its dV is 0).
// CHECK-LABEL: func.func @f_fwd(
// CHECK-SAME: -> (tensor<1x4x33x16xf32>, tensor<1x4x33xf32>, tensor<1x4x33x32xf32>, tensor<1x4x33xf32>, tensor<1x4x33xf32>)
// CHECK-LABEL: func.func @f_bwd(
// CHECK-SAME: %[[QS:[^:]*]]: tensor<1x4x33x16xf32>, %[[KS:[^:]*]]: tensor<1x2x40x16xf32>, %{{[^:]*}}: tensor<1x2x40x16xf32>, %[[QT:[^:]*]]: tensor<1x4x33x32xf32>, %[[KT:[^:]*]]: tensor<1x1x40x32xf32>, %{{[^:]*}}: tensor<1x1x40x32xf32>, %{{[^:]*}}: tensor<1xi32>, %{{[^:]*}}: tensor<33xi32>,
// CHECK-SAME: %[[OS:[^:]*]]: tensor<1x4x33x16xf32>, %{{[^:]*}}: tensor<1x4x33xf32>, %[[OT:[^:]*]]: tensor<1x4x33x32xf32>, %[[LT:[^:]*]]: tensor<1x4x33xf32>, %[[LS:[^:]*]]: tensor<1x4x33xf32>, %[[DO:[^:]*]]: tensor<1x4x33x16xf32>, %[[DKL:[^:]*]]: tensor<1x4x33xf32>)
// CHECK: %[[GQS:[^,]*]], %[[GKS:[^,]*]], %[[GLS:[^,]*]], %[[GQT:[^,]*]], %[[GKT:[^,]*]], %[[GLT:[^ ]*]] = attn.distill_grad %[[QS]], %[[KS]], %[[LS]] teacher %[[QT]], %[[KT]], %[[LT]] grad %[[DKL]] teacher_scale 1.000000e-01 causal lengths(%{{.*}} : tensor<1xi32>) mask_captures(%{{.*}} : tensor<33xi32>) :
// CHECK-SAME: mask_mod {
// CHECK: arith.cmpi sge
// CHECK: %[[SQ:[^,]*]], %[[SK:[^,]*]], %[[SV:[^ ]*]] = attn.attention_grad %[[QS]], %[[KS]], %{{.*}}, %[[OS]], %[[LS]], %[[DO]] lse_grad(%[[GLS]] : tensor<1x4x33xf32>) causal
// CHECK-DAG: %[[DQS:.*]] = arith.addf %[[GQS]], %[[SQ]]
// CHECK-DAG: %[[DKS:.*]] = arith.addf %[[GKS]], %[[SK]]
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<1x4x33x32xf32>
// CHECK: %[[TQ:[^,]*]], %[[TK:[^,]*]], %[[TV:[^ ]*]] = attn.attention_grad %[[QT]], %[[KT]], %{{.*}}, %[[OT]], %[[LT]], %[[ZERO]] lse_grad(%[[GLT]] : tensor<1x4x33xf32>) scale 1.000000e-01 causal
// CHECK-DAG: %[[DQT:.*]] = arith.addf %[[GQT]], %[[TQ]]
// CHECK-DAG: %[[DKT:.*]] = arith.addf %[[GKT]], %[[TK]]
// CHECK: return %[[DQS]], %[[DKS]], %[[SV]], %[[DQT]], %[[DKT]], %[[TV]]
func.func @f(%qs: tensor<1x4x33x16xf32>, %ks: tensor<1x2x40x16xf32>, %vs: tensor<1x2x40x16xf32>,
             %qt: tensor<1x4x33x32xf32>, %kt: tensor<1x1x40x32xf32>, %vt: tensor<1x1x40x32xf32>,
             %len: tensor<1xi32>, %doc: tensor<33xi32>)
    -> (tensor<1x4x33x16xf32>, tensor<1x4x33xf32>) {
  %ot, %lt = attn.attention %qt, %kt, %vt scale 0.1 causal
      : tensor<1x4x33x32xf32>, tensor<1x1x40x32xf32>, tensor<1x1x40x32xf32>
        -> tensor<1x4x33x32xf32>, tensor<1x4x33xf32>
  %os, %ls = attn.attention %qs, %ks, %vs causal
      : tensor<1x4x33x16xf32>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>
        -> tensor<1x4x33x16xf32>, tensor<1x4x33xf32>
  %kl = attn.distill %qs, %ks, %ls teacher %qt, %kt, %lt teacher_scale 0.1 causal
      lengths(%len : tensor<1xi32>) mask_captures(%doc : tensor<33xi32>)
      : tensor<1x4x33x16xf32>, tensor<1x2x40x16xf32>, tensor<1x4x33xf32>
        teacher tensor<1x4x33x32xf32>, tensor<1x1x40x32xf32>, tensor<1x4x33xf32>
        -> tensor<1x4x33xf32>
      mask_mod {
  ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<33xi32>):
    %di = tensor.extract %d[%i] : tensor<33xi32>
    %z = arith.constant 0 : i32
    %keep = arith.cmpi sge, %di, %z : i32
    attn.yield %keep : i1
  }
  return %os, %kl : tensor<1x4x33x16xf32>, tensor<1x4x33xf32>
}

// -----

// The mean's cotangent is a scalar; an LSE that is an argument of @f gets
// the distill_grad's dLSE as its gradient.
// CHECK-LABEL: func.func @g_bwd(
// CHECK-SAME: %[[DM:[^:]*]]: tensor<f32>) -> (tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>)
// CHECK: %[[A:[^,]*]], %[[B:[^,]*]], %[[C:[^,]*]], %[[D:[^,]*]], %[[E:[^,]*]], %[[F:[^ ]*]] = attn.distill_grad {{.*}} grad %[[DM]] : {{.*}} grad tensor<f32> ->
// CHECK: return %[[A]], %[[B]], %[[C]], %[[D]], %[[E]], %[[F]] :
func.func @g(%qs: tensor<1x2x8x16xf32>, %ks: tensor<1x2x8x16xf32>, %ls: tensor<1x2x8xf32>,
             %qt: tensor<1x2x8x16xf32>, %kt: tensor<1x2x8x16xf32>, %lt: tensor<1x2x8xf32>) -> tensor<f32> {
  %kl = attn.distill %qs, %ks, %ls teacher %qt, %kt, %lt
      : tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32>
        teacher tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8xf32> -> tensor<f32>
  return %kl : tensor<f32>
}
