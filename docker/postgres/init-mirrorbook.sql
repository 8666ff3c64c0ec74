-- Runs once, when the PostgreSQL volume is first initialised (docker-entrypoint-initdb.d).
-- The image itself creates the Airflow database and user (POSTGRES_DB / POSTGRES_USER).
-- mirrorbook's audit trail gets a database and user of its own, so Airflow's DB maintenance never
-- touches it: MIRRORBOOK_AUDIT_URL=postgresql+psycopg2://mirrorbook:mirrorbook@postgres:5432/mirrorbook_audit
CREATE USER mirrorbook WITH PASSWORD 'mirrorbook';
CREATE DATABASE mirrorbook_audit OWNER mirrorbook;
