"""Coordinator operations, each written once over the engine seam (`coordinator/engine.py`):
`async def op(s: Session, *args)`, run by the facade (`coordinator/facade.py`) inside one
transaction its engine opened, timed under the operation's name."""
