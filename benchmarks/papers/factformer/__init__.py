"""The FactFormer paper (Li et al. 2023): its tables and the 3D smoke benchmark."""
