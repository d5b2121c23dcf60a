# identity: nothing to do
