"""xml_contract (seed 004): the model writes its intent as XML blocks; the system validates and runs them."""
