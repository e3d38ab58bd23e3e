"""From the engine's conclusions to a reply: diagnoses ranked, questions chosen, remedies
prescribed with their effect on the estimate, and the report every channel renders."""
