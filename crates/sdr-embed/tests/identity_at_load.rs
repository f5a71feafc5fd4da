//! The identity of a loaded model is fixed at load: the folder changing afterwards
//! (its hash sidecar rewritten) does not change what the loaded model says it is.

mod common;

use std::sync::Arc;

use sdr_embed::{open_encoder, EncoderOptions, SentenceCache, DEFAULT_MODEL, DEFAULT_MODEL_SHA256};

/// The folder changing after load (its hash sidecar rewritten) does not change what
/// the loaded model says it is: the identity was read once, at load.
#[cfg(unix)]
#[test]
fn the_identity_does_not_follow_the_folder_after_load() {
    // A folder of its own would get a packed-weights file of its own (435 MB): pack in
    // memory. The only test of this binary, so no other thread reads the variable.
    std::env::set_var(sdr_embed::PACKED_CACHE_ENV, "off");
    let source = common::model_dir(DEFAULT_MODEL);
    let tmp = tempfile::tempdir().unwrap();
    // The model's files, linked into a folder of the same name with a sidecar of its own.
    let dir = tmp.path().join(DEFAULT_MODEL);
    std::fs::create_dir(&dir).unwrap();
    for entry in std::fs::read_dir(&source).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != ".sha256" {
            std::os::unix::fs::symlink(entry.path(), dir.join(entry.file_name())).unwrap();
        }
    }
    std::fs::write(dir.join(".sha256"), format!("{DEFAULT_MODEL_SHA256}\n")).unwrap();
    let opts = EncoderOptions {
        cache: false,
        ..Default::default()
    };
    let loaded = open_encoder("mpnet", Some(&dir), opts).unwrap();
    let model: Arc<sdr_embed::Encoder> = loaded.model.clone().unwrap();
    let at_load = format!("{DEFAULT_MODEL}@{DEFAULT_MODEL_SHA256}/f32");
    assert_eq!(loaded.encoder.identity().unwrap(), at_load);

    let other = "0123456789abcdef".repeat(4);
    std::fs::write(dir.join(".sha256"), format!("{other}\n")).unwrap();
    assert_eq!(sdr_embed::weights_sha256(&dir).unwrap(), other);
    assert_eq!(loaded.encoder.identity().unwrap(), at_load);
    assert_eq!(model.weights_sha256().unwrap(), DEFAULT_MODEL_SHA256);
    assert_eq!(model.encoder_identity().identity(), at_load);
    assert_eq!(
        SentenceCache::for_encoder(loaded.encoder.as_ref(), Some(1.0))
            .unwrap()
            .identity(),
        at_load
    );
}
