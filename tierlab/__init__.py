"""tierlab: a simulator of Linux memory tiering (DRAM + CXL)."""
