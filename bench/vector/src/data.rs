//! Seeded synthetic embeddings: a clustered distribution shaped like sentence embeddings, and
//! uniform random unit vectors (the hard case for any graph index).

/// SplitMix64: small, seedable, the same on every platform.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal (Box–Muller).
    pub fn normal(&mut self) -> f32 {
        let (u, v) = (self.unit(), self.unit());
        ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// Sentence-embedding-like: a shared mean direction (embeddings of unrelated texts still
    /// have a positive cosine), `CENTRES` topic centres on a decaying spectrum (few strong
    /// directions, many weak ones), each with its own anisotropic noise (per-dimension scales).
    Clustered,
    /// Gaussian vectors, normalised: uniform on the sphere, no structure at all.
    Uniform,
}

impl Distribution {
    pub fn name(self) -> &'static str {
        match self {
            Self::Clustered => "clustered",
            Self::Uniform => "uniform",
        }
    }
}

/// Topic centres of the clustered distribution.
pub const CENTRES: usize = 2000;

pub fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Draws unit vectors of one distribution; the same seed gives the same stream on every
/// platform (up to the last bit of `ln`/`cos`, which do not change neighbours).
pub struct Generator {
    dist: Distribution,
    dims: usize,
    rng: Rng,
    mean: Vec<f32>,
    centres: Vec<Vec<f32>>,
    noise: Vec<Vec<f32>>,
}

impl Generator {
    pub fn new(dist: Distribution, dims: usize, seed: u64) -> Self {
        let mut rng = Rng(seed);
        let (mut mean, mut centres, mut noise) = (Vec::new(), Vec::new(), Vec::new());
        if dist == Distribution::Clustered {
            let spectrum: Vec<f32> = (0..dims)
                .map(|i| (1.0 + i as f32 / 24.0).powf(-0.5))
                .collect();
            mean = (0..dims).map(|_| rng.normal()).collect();
            normalise(&mut mean);
            let spread = spectrum.iter().map(|s| s * s).sum::<f32>().sqrt();
            for _ in 0..CENTRES {
                centres.push(spectrum.iter().map(|s| rng.normal() * s / spread).collect());
                let size = 0.45 + 0.3 * rng.unit() as f32;
                noise.push(
                    spectrum
                        .iter()
                        .map(|s| size * s / spread * (0.5 * rng.normal()).exp())
                        .collect(),
                );
            }
        }
        Self {
            dist,
            dims,
            rng,
            mean,
            centres,
            noise,
        }
    }

    pub fn next_vector(&mut self) -> Vec<f32> {
        let mut v: Vec<f32> = match self.dist {
            Distribution::Uniform => (0..self.dims).map(|_| self.rng.normal()).collect(),
            Distribution::Clustered => {
                let k = self.rng.below(CENTRES);
                let (centre, noise) = (&self.centres[k], &self.noise[k]);
                (0..self.dims)
                    .map(|i| 0.6 * self.mean[i] + centre[i] + noise[i] * self.rng.normal())
                    .collect()
            }
        };
        normalise(&mut v);
        v
    }

    pub fn take(&mut self, n: usize) -> Vec<Vec<f32>> {
        (0..n).map(|_| self.next_vector()).collect()
    }
}
