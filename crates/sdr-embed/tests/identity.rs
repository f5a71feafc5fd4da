//! One identity per loaded model, fixed at load: the names the model is known by
//! (the name corpora record, the identity the reward's sentence caches are keyed by,
//! the cache key of `--cache-dir` files) are formed once by `EncoderIdentity` when it
//! loads, and every entry point and wrapper hands out those same values.

mod common;

use sdr_embed::{
    open_encoder, CacheKeyed, EncoderOptions, ModelEncoder, Precision, SentenceCache,
    SentenceEncoder, DEFAULT_MODEL, DEFAULT_MODEL_SHA256,
};

fn options(precision: Precision) -> EncoderOptions {
    EncoderOptions {
        precision,
        ..Default::default()
    }
}

#[test]
fn every_entry_point_hands_out_the_identity_fixed_at_load() {
    let dir = common::model_dir(DEFAULT_MODEL);
    for asked in [Precision::F32, Precision::Bf16] {
        let loaded = open_encoder("mpnet", Some(&dir), options(asked)).unwrap();
        let model = loaded.model.clone().unwrap();
        let id = model.encoder_identity();
        // The precision in force (`bf16` is mixed bf16 or f32, by CPU).
        let p = model.precision();
        assert_eq!(id.precision(), p);
        let recorded = match p {
            Precision::F32 => DEFAULT_MODEL.to_string(),
            _ => format!("{DEFAULT_MODEL}+bf16"),
        };
        // As SDR has always written them.
        assert_eq!(id.recorded_name(), recorded);
        assert_eq!(
            id.identity(),
            format!("{DEFAULT_MODEL}@{DEFAULT_MODEL_SHA256}/{p}")
        );
        assert_eq!(id.cache_key(), format!("{DEFAULT_MODEL}/{p}"));
        assert_eq!(
            id.cache_file_name(),
            format!("{DEFAULT_MODEL}-{}-{p:?}.sdrc", &DEFAULT_MODEL_SHA256[..16])
        );

        // The identity: the model itself, the loader's encoder, either wrapper shape,
        // boxed, and the cache made for it.
        let boxed: Box<dyn SentenceEncoder> = Box::new(loaded.encoder.clone());
        let by_identity: [&dyn SentenceEncoder; 5] = [
            model.as_ref(),
            loaded.encoder.as_ref(),
            &ModelEncoder(model.clone()),
            &ModelEncoder(model.as_ref()),
            boxed.as_ref(),
        ];
        for e in by_identity {
            assert_eq!(e.identity().unwrap(), id.identity());
            assert_eq!(e.weights_sha256().unwrap(), DEFAULT_MODEL_SHA256);
            assert_eq!(e.dim(), 768);
        }
        let cache = SentenceCache::for_encoder(loaded.encoder.as_ref(), None).unwrap();
        assert_eq!(cache.identity(), id.identity());

        // The cache key: the model's own cache and the `--cache-dir` view.
        let keyed = CacheKeyed(model.clone());
        assert_eq!(keyed.identity().unwrap(), id.cache_key());
        assert_eq!(model.cache_identity(), id.cache_key());
        assert_eq!(model.cache().unwrap().identity(), id.cache_key());

        // Names: corpora record the precision; the model's own name is its folder's.
        assert_eq!(loaded.encoder.name(), recorded);
        assert_eq!(keyed.name(), recorded);
        assert_eq!(model.recorded_name(), recorded);
        assert_eq!(SentenceEncoder::name(model.as_ref()), DEFAULT_MODEL);
        // A notice only where bf16 fell back to f32 on this CPU.
        assert_eq!(
            loaded.notice.is_some(),
            asked == Precision::Bf16 && p == Precision::F32
        );
    }
}
