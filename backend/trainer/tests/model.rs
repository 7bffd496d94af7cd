//! The ViT's shapes, parameter counts and output layout against the tutorial's figures.

use scalebook_trainer::model::{VisionTransformer, VitSpec, unpatchify};
use tch::{Device, Kind, Tensor, nn};

fn spec(img: [i64; 2], patch: i64, dim: i64, depth: i64, heads: i64) -> VitSpec {
    VitSpec {
        img_size: img,
        patch_size: patch,
        in_chans: 20,
        out_chans: 20,
        embed_dim: dim,
        depth,
        num_heads: heads,
        mlp_ratio: 4,
        dropout: 0.0,
        norm_eps: 1e-6,
        recompute: false,
        fused_qkv: false,
    }
}

fn param_count(spec: &VitSpec) -> i64 {
    let vs = nn::VarStore::new(Device::Cpu);
    let _model = VisionTransformer::new(&vs.root(), spec);
    vs.trainable_variables().iter().map(Tensor::numel).sum::<usize>() as i64
}

#[test]
fn base_has_the_tutorials_parameter_count() {
    // Reference §3: base (D=384, p=8, 12 blocks) has 23,832,960 parameters.
    assert_eq!(param_count(&spec([360, 720], 8, 384, 12, 8)), 23_832_960);
}

#[test]
fn parameter_count_follows_the_per_block_formula() {
    // Per block 12·D² + 13·D; embedding C·p²·D + D, position N·D, final norm 2D, head D·C·p².
    let s = spec([36, 72], 6, 48, 3, 4);
    let (d, n, c, p) = (48, 6 * 12, 20, 6);
    let expected = c * p * p * d + d + n * d + 3 * (12 * d * d + 13 * d) + 2 * d + d * c * p * p;
    assert_eq!(param_count(&s), expected);
}

#[test]
fn forward_maps_fields_to_fields_of_the_same_shape() {
    tch::manual_seed(0);
    let s = spec([36, 72], 6, 48, 2, 4);
    let vs = nn::VarStore::new(Device::Cpu);
    let model = VisionTransformer::new(&vs.root(), &s);
    let x = Tensor::randn([2, 20, 36, 72], (Kind::Float, Device::Cpu));
    let y = model.forward(&x, false).unwrap();
    assert_eq!(y.size(), vec![2, 20, 36, 72]);
    assert!(bool::try_from(y.isfinite().all()).unwrap());
    // Different inputs give different outputs: the model actually reads its input.
    let y2 = model.forward(&(x + 1.0), false).unwrap();
    assert!(f64::try_from((y - y2).abs().max()).unwrap() > 1e-4);
}

#[test]
fn unpatchify_puts_each_token_value_where_the_tutorial_einsum_does() {
    // Encode (patch row r, patch col q, channel c) into each token vector, laid out with the
    // channel fastest, and check every pixel of every patch lands at (c, h·p + r, w·p + q).
    let s = spec([4, 6], 2, 8, 1, 1);
    let (p, c) = (2i64, 20i64);
    let (gh, gw) = s.grid();
    let mut values = Vec::new();
    for h in 0..gh {
        for w in 0..gw {
            for r in 0..p {
                for q in 0..p {
                    for ch in 0..c {
                        values.push((ch * 10_000 + (h * p + r) * 100 + (w * p + q)) as f32);
                    }
                }
            }
        }
    }
    let tokens = Tensor::from_slice(&values).view([1, gh * gw, p * p * c]);
    let fields = unpatchify(&tokens, &s);
    assert_eq!(fields.size(), vec![1, 20, 4, 6]);
    for ch in 0..c {
        for y in 0..4 {
            for x in 0..6 {
                let v = fields.double_value(&[0, ch, y, x]);
                assert_eq!(v as i64, ch * 10_000 + y * 100 + x);
            }
        }
    }
}

#[test]
fn the_tutorials_base_config_maps_360x720_fields_to_360x720_fields() {
    // The shapes do not depend on depth, so one block keeps this fast on a CPU.
    let text = std::fs::read_to_string(format!("{}/../../config/ViT.yaml", std::env::var("CARGO_MANIFEST_DIR").unwrap())).unwrap();
    let mut config = scalebook_shared::config::ConfigFile::parse(&text).unwrap().get("base").unwrap();
    config.apply_overrides(&["depth=1"]).unwrap();
    let s = VitSpec::from(&config);
    assert_eq!((s.grid(), s.num_tokens(), s.head_dim()), ((45, 90), 4050, 48));
    let vs = nn::VarStore::new(Device::Cpu);
    let model = VisionTransformer::new(&vs.root(), &s);
    let y = tch::no_grad(|| model.forward(&Tensor::randn([1, 20, 360, 720], (Kind::Float, Device::Cpu)), false).unwrap());
    assert_eq!(y.size(), vec![1, 20, 360, 720]);
}

#[test]
fn patch_embedding_is_the_tutorials_strided_convolution() {
    let spec = spec([12, 18], 3, 8, 1, 2);
    let x = (Tensor::arange(2 * 20 * 12 * 18, (Kind::Float, Device::Cpu)) * 0.11).sin().reshape([2, 20, 12, 18]);
    let weight = (Tensor::arange(8 * 20 * 3 * 3, (Kind::Float, Device::Cpu)) * 0.07).cos().reshape([8, 20, 3, 3]);
    let bias = Tensor::arange(8, (Kind::Float, Device::Cpu)) * 0.5;
    let tokens = scalebook_trainer::model::patch_embed(&x, &weight, &bias, &spec);
    let conv = x.conv2d(&weight, Some(&bias), [3, 3], [0, 0], [1, 1], 1).flatten(2, -1).transpose(1, 2);
    assert_eq!(tokens.size(), vec![2, 4 * 6, 8]);
    let error = f64::try_from((&tokens - &conv).abs().max()).unwrap();
    assert!(error < 1e-4, "largest difference {error}");
}

/// `enable_jit`'s one q/k/v product is the same model: the same parameters under the same
/// names (so checkpoints load either way), the same output and the same gradients.
#[test]
fn one_qkv_product_computes_what_three_do() {
    let run = |fused: bool| {
        tch::manual_seed(0);
        let s = VitSpec { fused_qkv: fused, ..spec([36, 72], 6, 48, 2, 4) };
        let vs = nn::VarStore::new(Device::Cpu);
        let model = VisionTransformer::new(&vs.root(), &s);
        let x = Tensor::randn([2, 20, 36, 72], (Kind::Float, Device::Cpu));
        let y = model.forward(&x, true).unwrap();
        y.square().sum(Kind::Float).backward();
        let mut grads: Vec<(String, Tensor)> = vs.variables().into_iter().map(|(name, v)| (name, v.grad())).collect();
        grads.sort_by(|a, b| a.0.cmp(&b.0));
        (y.detach(), grads)
    };
    let ((y3, grads3), (y1, grads1)) = (run(false), run(true));
    let max = |t: &Tensor| f64::try_from(t.abs().max()).unwrap();
    // Relative to the tensor, or to the largest gradient where a tensor's is zero but for
    // rounding (k's bias: softmax ignores what it adds to every score of a row).
    let largest = grads3.iter().map(|(_, g)| max(g)).fold(0.0, f64::max);
    let close = |a: &Tensor, b: &Tensor| max(&(a - b)) <= 1e-5 * max(a).max(1e-3 * largest);
    assert!(close(&y3, &y1));
    assert_eq!(grads3.iter().map(|g| &g.0).collect::<Vec<_>>(), grads1.iter().map(|g| &g.0).collect::<Vec<_>>());
    assert!(grads3.iter().any(|(name, _)| name.ends_with("attn.q.weight")));
    for ((name, a), (_, b)) in grads3.iter().zip(&grads1) {
        assert!(close(a, b), "{name}: {} differs by {}, largest {largest}", max(a), max(&(a - b)));
    }
}
