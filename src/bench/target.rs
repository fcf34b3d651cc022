//! Where a cell runs: the runtime a bench target names (TensorRT, tract on the CPU or on CUDA,
//! or ONNX Runtime on the CPU or on its CUDA provider), the one type every place that names a
//! backend shares.

pub use crate::backend::select::Runtime as Target;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::select::BackendKind;
    use crate::backend::Device;

    #[test]
    fn targets_keep_their_names_and_backends() {
        let names: Vec<String> = Target::ALL.iter().map(|t| t.to_string()).collect();
        assert_eq!(
            names,
            ["trt", "ort-cuda", "tract-cuda", "tract-cpu", "ort-cpu"]
        );
        let json = serde_json::to_string(&Target::ALL).unwrap();
        assert_eq!(
            json,
            r#"["trt","ort-cuda","tract-cuda","tract-cpu","ort-cpu"]"#
        );
        let err = "tract-gpu".parse::<Target>().unwrap_err();
        assert!(err.to_string().contains("tract-gpu"));
        assert!(Target::Trt.backend().is_none());
        assert_eq!(Target::OrtCpu.backend().unwrap().kind, BackendKind::Ort);
        let gpu = Target::OrtCuda.backend().unwrap();
        assert_eq!((gpu.kind, gpu.device), (BackendKind::Ort, Device::Cuda));
        assert!(Target::OrtCuda.on_gpu() && !Target::OrtCpu.on_gpu());
        // Targets sort in their declaration order, whatever order a table lists them in.
        let mut sorted = Target::ALL;
        sorted.sort();
        assert_eq!(
            sorted,
            [
                Target::Trt,
                Target::TractCpu,
                Target::TractCuda,
                Target::OrtCpu,
                Target::OrtCuda
            ]
        );
    }
}
