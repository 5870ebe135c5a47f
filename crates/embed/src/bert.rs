//! all-MiniLM-L6-v2's encoder (a BERT: embeddings, then layers of self-attention and a GELU
//! feed-forward, each closed by a residual and a layer norm) over candle's tensor operations.
//!
//! Written here rather than taken from `candle-transformers`' BERT because that one spends
//! most of a long text's time outside the matrix products: per layer and head it divides the
//! attention scores, adds the mask and runs an unfused softmax, five passes over a tensor of
//! length² numbers each allocated afresh, where this one folds the scale into the query
//! weights, adds a mask only to a pass that has padding, and uses candle's fused softmax and
//! layer norm. The three attention projections are one matrix product, and every weight is
//! stored transposed once at load, so a product reads it in order. `bench/encoder.sh` measures
//! it against the same model in PyTorch.

use std::collections::HashMap;

use candle_core::{D, Tensor};

/// Why weights cannot be loaded or a text not embedded.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("the model's config.json: {0}")]
    Config(#[from] serde_json::Error),
    #[error("the model: {0}")]
    Candle(#[from] candle_core::Error),
    #[error("the model is not all-MiniLM-L6-v2's shape: {0}")]
    Shape(String),
}

/// The few fields of the model's `config.json` the encoder needs.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub layer_norm_eps: f64,
    pub hidden_act: String,
}

/// A layer norm's scale and shift.
struct Norm {
    weight: Tensor,
    bias: Tensor,
}

/// A dense layer's weight, transposed to (inputs, outputs), and its bias.
struct Dense {
    weight: Tensor,
    bias: Tensor,
}

impl Dense {
    /// `x` (rows, inputs) times the weight, plus the bias.
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.matmul(&self.weight)?.broadcast_add(&self.bias)
    }
}

struct Layer {
    /// Query (scaled by 1/√head size), key and value projections side by side.
    qkv: Dense,
    attention_out: Dense,
    attention_norm: Norm,
    intermediate: Dense,
    output: Dense,
    output_norm: Norm,
}

/// The encoder: everything but the word embeddings, which the caller gathers per pass.
pub struct Encoder {
    /// Position embeddings plus the token type 0 row (every text is one segment).
    positions: Tensor,
    embeddings_norm: Norm,
    layers: Vec<Layer>,
    heads: usize,
    eps: f32,
}

impl Encoder {
    /// The encoder from the model's tensors by their names in its `model.safetensors`.
    pub fn new(config: &Config, mut tensors: HashMap<String, Tensor>) -> Result<Self, ModelError> {
        let hidden = config.hidden_size;
        let heads = config.num_attention_heads;
        if config.hidden_act != "gelu" || heads == 0 || !hidden.is_multiple_of(heads) {
            return Err(ModelError::Shape(format!(
                "activation {}, {heads} heads of {hidden}",
                config.hidden_act
            )));
        }
        let t = &mut tensors;
        let embeddings_norm = norm(t, "embeddings", hidden)?;
        let positions = take(
            t,
            "embeddings.position_embeddings.weight",
            &[config.max_position_embeddings, hidden],
        )?
        .broadcast_add(
            &take(t, "embeddings.token_type_embeddings.weight", &[2, hidden])?.get(0)?,
        )?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for l in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{l}");
            let mut dense = |name: &str, outputs: usize, inputs: usize| {
                let weight = take(t, &format!("{p}.{name}.weight"), &[outputs, inputs])?;
                let bias = take(t, &format!("{p}.{name}.bias"), &[outputs])?;
                Ok::<_, ModelError>((weight, bias))
            };
            let (qw, qb) = dense("attention.self.query", hidden, hidden)?;
            let scale = 1.0 / ((hidden / heads) as f64).sqrt();
            let (qw, qb) = ((qw * scale)?, (qb * scale)?);
            let (kw, kb) = dense("attention.self.key", hidden, hidden)?;
            let (vw, vb) = dense("attention.self.value", hidden, hidden)?;
            let (ow, ob) = dense("attention.output.dense", hidden, hidden)?;
            let inter = config.intermediate_size;
            let (iw, ib) = dense("intermediate.dense", inter, hidden)?;
            let (dw, db) = dense("output.dense", hidden, inter)?;
            let transposed = |w: Tensor, b: Tensor| -> candle_core::Result<Dense> {
                Ok(Dense {
                    weight: w.t()?.contiguous()?,
                    bias: b,
                })
            };
            layers.push(Layer {
                qkv: transposed(
                    Tensor::cat(&[qw, kw, vw], 0)?,
                    Tensor::cat(&[qb, kb, vb], 0)?,
                )?,
                attention_out: transposed(ow, ob)?,
                attention_norm: norm(t, &format!("{p}.attention.output"), hidden)?,
                intermediate: transposed(iw, ib)?,
                output: transposed(dw, db)?,
                output_norm: norm(t, &format!("{p}.output"), hidden)?,
            });
        }
        Ok(Self {
            positions,
            embeddings_norm,
            layers,
            heads,
            eps: config.layer_norm_eps as f32,
        })
    }

    /// The last hidden states (texts, tokens, hidden) of a pass whose word embeddings are
    /// `words` (texts, tokens, hidden); `lengths` are the texts' token counts, the rest of each
    /// row padding that no token attends to.
    pub fn forward(&self, words: &Tensor, lengths: &[usize]) -> candle_core::Result<Tensor> {
        let (texts, tokens, hidden) = words.dims3()?;
        let head = hidden / self.heads;
        let x = words.broadcast_add(&self.positions.narrow(0, 0, tokens)?)?;
        let mut x = self.norm(&x.reshape((texts * tokens, hidden))?, &self.embeddings_norm)?;
        // Added to the scores of padding keys: the softmax gives them nothing.
        let mask = if lengths.iter().all(|&n| n == tokens) {
            None
        } else {
            let values: Vec<f32> = lengths
                .iter()
                .flat_map(|&n| (0..tokens).map(move |i| if i < n { 0.0 } else { f32::MIN }))
                .collect();
            Some(Tensor::from_vec(
                values,
                (texts, 1, 1, tokens),
                words.device(),
            )?)
        };
        for layer in &self.layers {
            let qkv = layer
                .qkv
                .forward(&x)?
                .reshape((texts, tokens, 3, self.heads, head))?
                .permute((2, 0, 3, 1, 4))?;
            let q = qkv.get(0)?.contiguous()?;
            let k = qkv.get(1)?.contiguous()?;
            let v = qkv.get(2)?.contiguous()?;
            let mut scores = q.matmul(&k.t()?)?;
            if let Some(mask) = &mask {
                scores = scores.broadcast_add(mask)?;
            }
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let context = probs
                .matmul(&v)?
                .transpose(1, 2)?
                .reshape((texts * tokens, hidden))?;
            let attended = layer.attention_out.forward(&context)?;
            let x1 = self.norm(&(attended + &x)?, &layer.attention_norm)?;
            let inner = layer.intermediate.forward(&x1)?.gelu_erf()?;
            let out = layer.output.forward(&inner)?;
            x = self.norm(&(out + &x1)?, &layer.output_norm)?;
        }
        x.reshape((texts, tokens, hidden))
    }

    fn norm(&self, x: &Tensor, norm: &Norm) -> candle_core::Result<Tensor> {
        candle_nn::ops::layer_norm(&x.contiguous()?, &norm.weight, &norm.bias, self.eps)
    }
}

/// The tensor `name` of `tensors`, taken out, if it has `shape`.
fn take(
    tensors: &mut HashMap<String, Tensor>,
    name: &str,
    shape: &[usize],
) -> Result<Tensor, ModelError> {
    let t = tensors
        .remove(name)
        .ok_or_else(|| ModelError::Shape(format!("no {name}")))?;
    if t.dims() != shape {
        return Err(ModelError::Shape(format!("{name} is {:?}", t.dims())));
    }
    Ok(t)
}

/// The layer norm under `prefix`.
fn norm(
    tensors: &mut HashMap<String, Tensor>,
    prefix: &str,
    hidden: usize,
) -> Result<Norm, ModelError> {
    Ok(Norm {
        weight: take(tensors, &format!("{prefix}.LayerNorm.weight"), &[hidden])?,
        bias: take(tensors, &format!("{prefix}.LayerNorm.bias"), &[hidden])?,
    })
}

/// The mean of each text's first `lengths[i]` hidden states, L2-normalised.
pub fn pooled(hidden: &Tensor, lengths: &[usize]) -> candle_core::Result<Vec<Vec<f32>>> {
    let mut out = Vec::with_capacity(lengths.len());
    for (i, &n) in lengths.iter().enumerate() {
        let mean = hidden.get(i)?.narrow(0, 0, n)?.mean(D::Minus2)?;
        let mut row: Vec<f32> = mean.to_vec1()?;
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            row.iter_mut().for_each(|x| *x /= norm);
        }
        out.push(row);
    }
    Ok(out)
}
