"""The lab: runs scenarios (servers, faults, noise, the client inside its boundary) and publishes
what the observers saw as events. The only layer with side effects on the machine."""
