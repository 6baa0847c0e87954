DROP TABLE IF EXISTS `outbox_relays`;
