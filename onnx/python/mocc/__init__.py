"""MOCC (EuroSys'22) for polycc: training over the Rust simulator, online adaptation, ONNX export."""
