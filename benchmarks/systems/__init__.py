"""Speed, memory and scaling: compilation, CUDA graphs, DDP, the CPU loop, streaming, conversion, export."""
