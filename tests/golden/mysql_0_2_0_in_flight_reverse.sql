DROP TABLE IF EXISTS `outbox_in_flight`;
