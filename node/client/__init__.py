"""Client-facing AMQP: the connection handler, publisher and consumer links, and the /management node."""
