//! The transformer embedder: all-MiniLM-L6-v2 (a 6-layer BERT, 384 dimensions) run by candle in
//! pure Rust, natively and in wasm. Its weights come from the adapter (natively a file fetched
//! once from a registry package and checked against its SHA-256; in the Spin component, bytes
//! compiled in); its tokenizer is the built-in table's WordPiece, whose vocabulary is the
//! model's. A text's vector is the mean of its tokens' last hidden states (the padding masked
//! out), L2-normalised, as sentence-transformers computes it.
//!
//! Texts are cut at [`MAX_TOKENS`] word pieces, as the model was trained. Saves embed in batches
//! of texts of similar length (less padding), natively side by side; a query's vector is kept in a small cache, since
//! agents repeat their questions.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};

pub use super::bert::ModelError;
use super::bert::{Config, Encoder, pooled};
use super::builtin;
use lore_base::ports::{Embedder, PortError};

/// Stored beside each vector: the model, its pooling and its token limit.
pub const MODEL_ID: &str = crate::MINILM_MODEL_ID;

/// The model's output size.
pub const DIMENSIONS: usize = crate::MINILM_DIMENSIONS;

/// Word pieces per text, `[CLS]` and `[SEP]` included (the model's training length).
pub const MAX_TOKENS: usize = crate::MINILM_MAX_TOKENS;

/// Word pieces per forward pass (texts times the longest one's length) and texts per pass, at
/// most. Small passes of texts of one length: a pass of long texts holds two, so that its
/// attention scores (texts x 12 heads x length squared) stay small enough for the allocator to
/// reuse rather than map afresh, and many passes keep every core busy (`bench/encoder.sh`:
/// 512 word pieces did best among 256 to 4,096, 16 texts among 8 to 64).
const PASS_TOKENS: usize = 512;
const PASS_TEXTS: usize = 16;

/// Query vectors kept per process.
const CACHE_ENTRIES: usize = 2048;

const CLS: u32 = 101;
const SEP: u32 = 102;

/// The word embedding table's name in the weights: half the model (30,522 rows of 384), kept
/// apart from the encoder so that only the rows of a batch's tokens become a tensor.
const WORDS: &str = "embeddings.word_embeddings.weight";

/// The word embedding rows as little-endian f32 bytes: copied once (natively), or borrowed
/// where they lie in weights compiled into the program (a Spin request loads the model afresh,
/// and must not copy 47 MB to embed one query).
struct Words(Cow<'static, [u8]>);

impl Words {
    /// Appends token `id`'s row to `out`.
    fn row(&self, id: u32, out: &mut Vec<f32>) {
        let at = 4 * id as usize * DIMENSIONS;
        out.extend(
            self.0[at..at + 4 * DIMENSIONS]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        );
    }
}

/// A model's config, its encoder and its word embeddings' bytes.
type Parts<'a> = (Config, Encoder, &'a [u8]);

/// The loaded model, shareable by every thread of a process.
pub struct TransformerModel {
    config: Config,
    /// Every tensor but the word embeddings.
    encoder: Encoder,
    words: Words,
    cache: Mutex<QueryCache>,
}

impl TransformerModel {
    /// The model from its `config.json` and `model.safetensors` bytes, copied.
    pub fn load(config: &[u8], weights: &[u8]) -> Result<Self, ModelError> {
        let (config, encoder, words) = Self::parts(config, weights)?;
        Ok(Self::new(
            config,
            encoder,
            Words(Cow::Owned(words.to_vec())),
        ))
    }

    /// The model from bytes compiled into the program: the encoder's tensors copied, the word
    /// embeddings read in place.
    pub fn load_static(config: &[u8], weights: &'static [u8]) -> Result<Self, ModelError> {
        let (config, encoder, words) = Self::parts(config, weights)?;
        Ok(Self::new(config, encoder, Words(Cow::Borrowed(words))))
    }

    fn new(config: Config, encoder: Encoder, words: Words) -> Self {
        Self {
            config,
            encoder,
            words,
            cache: Mutex::new(QueryCache::default()),
        }
    }

    /// The config, the encoder's tensors and the word embeddings' bytes (little-endian f32).
    fn parts<'a>(config: &[u8], weights: &'a [u8]) -> Result<Parts<'a>, ModelError> {
        let config: Config = serde_json::from_slice(config)?;
        if config.hidden_size != DIMENSIONS || config.vocab_size != builtin::vocabulary_size() {
            return Err(ModelError::Shape(format!(
                "hidden size {}, vocabulary {}",
                config.hidden_size, config.vocab_size
            )));
        }
        let tensors = safetensors::SafeTensors::deserialize(weights)
            .map_err(|e| ModelError::Shape(e.to_string()))?;
        let mut encoder = HashMap::new();
        let mut words = None;
        for (name, view) in tensors.tensors() {
            // The position ids (0..512, a buffer of the PyTorch module): BERT counts them itself.
            if name == "embeddings.position_ids" {
                continue;
            }
            if view.dtype() != safetensors::Dtype::F32 {
                return Err(ModelError::Shape(format!(
                    "{name} is {:?}, not F32",
                    view.dtype()
                )));
            }
            if name == WORDS {
                if view.shape() != [config.vocab_size, DIMENSIONS] {
                    return Err(ModelError::Shape(format!("{name} is {:?}", view.shape())));
                }
                words = Some(view.data());
            } else {
                let t =
                    Tensor::from_raw_buffer(view.data(), DType::F32, view.shape(), &Device::Cpu)?;
                encoder.insert(name, t);
            }
        }
        let words = words.ok_or_else(|| ModelError::Shape(format!("no {WORDS}")))?;
        let encoder = Encoder::new(&config, encoder)?;
        Ok((config, encoder, words))
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
        let chunks = passes(&order, |i| ids[i].len());
        let pass = |chunk: &&[usize]| {
            let batch: Vec<&[u32]> = chunk.iter().map(|&i| ids[i].as_slice()).collect();
            self.forward(&batch)
        };
        // Natively the batches run side by side: one forward pass keeps only its large matrix
        // products on every core, the rest of it (attention's many small products, softmax,
        // GELU, the pooling) on one.
        #[cfg(not(target_family = "wasm"))]
        let passes: Vec<Vec<Vec<f32>>> = {
            use rayon::prelude::*;
            chunks.par_iter().map(pass).collect::<Result<_, _>>()?
        };
        #[cfg(target_family = "wasm")]
        let passes: Vec<Vec<Vec<f32>>> = chunks.iter().map(pass).collect::<Result<_, _>>()?;
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for (chunk, vectors) in chunks.iter().zip(passes) {
            for (&i, v) in chunk.iter().zip(vectors) {
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
        let lengths: Vec<usize> = batch.iter().map(|t| t.len()).collect();
        let last = self.config.vocab_size as u32 - 1;
        // Each text's rows, then padding ([PAD], token 0, which no token attends to).
        let mut rows: Vec<f32> = Vec::with_capacity(batch.len() * width * DIMENSIONS);
        for t in batch {
            let padding = std::iter::repeat_n(&0, width - t.len());
            for &id in t.iter().chain(padding) {
                self.words.row(id.min(last), &mut rows);
            }
        }
        let words = Tensor::from_vec(rows, (batch.len(), width, DIMENSIONS), &Device::Cpu)?;
        let hidden = self.encoder.forward(&words, &lengths)?;
        Ok(pooled(&hidden, &lengths)?)
    }
}

/// `order` (texts by length, shortest first) cut into forward passes: each of at most
/// [`PASS_TEXTS`] texts and [`PASS_TOKENS`] word pieces with its padding, or one text alone.
fn passes(order: &[usize], len: impl Fn(usize) -> usize) -> Vec<&[usize]> {
    let mut chunks = Vec::new();
    let mut start = 0;
    for end in 1..=order.len() {
        // The text at `end - 1` is the longest of the pass so far.
        let texts = end - start;
        if texts > 1 && (texts > PASS_TEXTS || texts * len(order[end - 1]) > PASS_TOKENS) {
            chunks.push(&order[start..end - 1]);
            start = end - 1;
        }
    }
    if start < order.len() {
        chunks.push(&order[start..]);
    }
    chunks
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
                    TransformerModel::load_static(config, weights)
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

    /// The compiled-in model's is the built-in table: a compact `search` ranks a hundred or so
    /// SDK texts, and a Spin request would otherwise run the transformer over all of them.
    fn for_catalog(&self) -> Option<Rc<dyn Embedder>> {
        match &*self.source {
            Source::Loaded(_) => None,
            Source::Static { .. } => Some(Rc::new(builtin::BuiltinEmbedder::new())),
        }
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, PortError> {
        self.model()?
            .embed(texts)
            .map_err(|e| PortError(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::{PASS_TEXTS, PASS_TOKENS, passes};

    #[test]
    fn passes_hold_every_text_once_within_their_bounds() {
        for lengths in [
            vec![],
            vec![3],
            vec![256; 7],
            (0..200).map(|i| 2 + i % 40).collect::<Vec<_>>(),
            (0..50).map(|i| 2 + i * 5).collect(),
            vec![600, 600],
        ] {
            let mut order: Vec<usize> = (0..lengths.len()).collect();
            order.sort_by_key(|&i| lengths[i]);
            let chunks = passes(&order, |i| lengths[i]);
            assert_eq!(chunks.concat(), order, "{lengths:?}");
            for chunk in &chunks {
                let widest = chunk.iter().map(|&i| lengths[i]).max().unwrap();
                assert!(!chunk.is_empty());
                assert!(
                    chunk.len() == 1
                        || (chunk.len() <= PASS_TEXTS && chunk.len() * widest <= PASS_TOKENS),
                    "{chunk:?} of {lengths:?}"
                );
            }
        }
    }
}
