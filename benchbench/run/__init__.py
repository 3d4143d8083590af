"""Layer 6: orchestration: method x task x seed x setup runs (resumable), chains of methods, sweeps
on Ray, the conformance kit. Imports the layers below it."""
