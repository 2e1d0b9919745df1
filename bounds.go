package strata

import (
	"fmt"

	"github.com/strata-llm/strata/models"
)

// checkContext bounds an asked-for context by the model's positions (past
// max_position_embeddings the model was never trained; the machine's memory
// is checked when the buffers are sized, in the engine).
func checkContext(c *models.Config, asked int) error {
	if limit := c.Architecture.Attention.MaxPositions; asked > 0 && limit > 0 && asked > limit {
		return fmt.Errorf("--context %d: model %s has %d positions (max_position_embeddings); expected at most that", asked, c.Name, limit)
	}
	return nil
}
