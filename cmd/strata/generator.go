package main

import (
	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/models"
)

// generate is the in-process generator openModel hands the loader
// (load.Options.Generate). strata links no generator, so it is nil and a
// model without an artifact gets the stratagen command to run; only this
// package's tests set it (to gentest.Generate), to open models under
// options no artifact is checked in for.
var generate func(*models.Config) (*artifact.Artifact, error)
