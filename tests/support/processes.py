"""The integration tests start servers with the product's own launcher."""
from edn.localnet.processes import ADMIN_TOKEN, ServerProcess, free_port

__all__ = ["ADMIN_TOKEN", "ServerProcess", "free_port"]
